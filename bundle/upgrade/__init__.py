"""`bundle upgrade`: what a new SGLang (or smg, NIXL, CUDA base) changes on sm_120, before anyone pulls it.

- closure.py:  a release's own exact pins, read from its wheel's METADATA (downloaded with pip)
- scratch.py:  a scratch copy of the project with an edited lock, resolved into hashed requirements by
               `make lock`'s own code (bundle.images.requirements.compile_locks)
- gather.py:   per side (old lock, new lock): the parser snapshots, the stand-in build and its audit
- compare.py:  the report, old against new (packages, parser contract, predictions, sm_120 code, guards,
               verdict), from those saved inputs only: pure, tested on recorded inputs
- check.py:    `--check`: what is newer than the lock, and which of it the pinned SGLang allows
"""
