"""The rehearsal: a topology run with no GPU, all of it in this package.

engine/      the real SGLang server on CPU with a small model trained here (server.py: what it changes in
             the servers' command lines and env; model.py: the model, made once per image;
             sgl_kernel_standin.py: the sgl-kernel stand-in's names, regenerated from SGLang's sources)
sim/         worker simulators behind the real router
simulator/   the program sim runs inside the rehearsal image (imports nothing else of the driver)
shared/      what both modes share: the rehearsal image (image.py) and what a rehearsal adds to the
             rendered env of the real topology (env.py), which the Slurm rehearsal cluster reads too
registry.py  the modes, `--rehearsal` parsed once into one of them

This file stays empty of imports: the rehearsal image runs `python -m bundle.rehearsal.simulator` with only
this package's simulator/ beside it.
"""
