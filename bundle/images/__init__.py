"""The images: the lock, hashed requirements, build, pull, the rehearsal image."""
