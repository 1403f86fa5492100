# Condenses debootstrap's log to progress lines (docker/debian-root.sh, docker/standin-root.sh):
# every phase line ("I: Retrieving Packages", "I: Unpacking the base system...") as it comes, and of
# the one-per-package lines ("I: Retrieving libc6 2.36-9", "I: Configuring libc-bin...") the first
# and every 25th of each kind, numbered. Minutes of downloads then read as steady progress, not as
# silence or six hundred lines. mawk and gawk alike; fflush because the reader is a pipe.
/^I: (Retrieving|Validating) [^ ]+ [^ ]+$/ || /^I: (Extracting|Unpacking|Configuring) [^ ]+\.\.\.$/ {
  if ($2 == "Validating") next  # one per package retrieved, right after it: nothing new
  seen[$2]++
  name = $3; sub(/\.\.\.$/, "", name)
  if (seen[$2] % 25 == 1) { print "debootstrap: " $2 " package " seen[$2] " (" name ")"; fflush() }
  next
}
/^[IEW]: / { print "debootstrap: " substr($0, 4); fflush() }
