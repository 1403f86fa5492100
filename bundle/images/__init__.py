"""The images: the lock, hashed requirements, build, pull, the images derived here."""
