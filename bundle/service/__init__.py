"""The services below the verbs, one per verb: typed values in, typed results out, the work done. A verb in
bundle/commands/ parses its flags into a request, calls a service, prints its result and maps it to an
exit code; `bundle tune` calls the same services for each candidate. No argparse namespace reaches this
package or anything below it, and nothing here prints but on the Reporter the verb passes in
(bundle/reporter.py; tests/test_no_print.py holds it).

prepare.py       the one path from bundle.yaml to a checked render (load -> render -> rules), the
                 additions to the env of a run with no GPU (a Mode) computed in one place
render.py        a render target's checked output; compose's render resolved by compose; a folder written
launch.py        LaunchRequest -> the stack up, ready, attested (reconciles one that is up); the compose
                 target's launcher (another target's launcher is its wing's own)
smoke.py         the smoke test of a launched topology, its identity and its report
bench.py         BenchRequest -> bench_serving's levels or a soak against a launched topology, the gate
audit.py         AuditRequest -> the image checked from inside, its report saved
verify.py        the running containers held to the lock
doctor.py        DoctorRequest -> the host's preflight report
running.py       Launched: the launched project a running verb acts on, as the verb found it
status.py        StatusRequest -> Status: containers, their problems (paused, hung), the front door's probe
down.py          DownRequest -> Downed (nothing up is a result): what down removed, left, left alone
logs.py          LogsRequest -> batches of log lines, a progress bar as its last state
top.py           TopRequest -> readings of the live figures per running server
build.py         BuildRequest -> Planned (a dry run) or Built
push.py          PushRequest -> Pushed: the values a release records, written to $GITHUB_OUTPUT when asked
pull.py          PullRequest -> Pulled: the image by digest, each check's verdict
sign.py          SignRequest -> Signed: cosign's keyless signature and the SBOM attested
lock.py          SetDigestRequest -> DigestSet: the published digest in the lock
model.py         ModelRequest -> Pinned, Compared, Identified: the checkpoint in the lock and a folder

`bundle tune`'s service sits above these, in the tune stage (bundle/tune/service.py): it runs them.
`bundle upgrade`'s is its own stage's (bundle/upgrade/service.py), below them.
"""
