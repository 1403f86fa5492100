"""The rehearsal: a topology run with no GPU, each mode a wing of its own.

engine/      the real SGLang server on CPU with a small model trained here (server.py: what it changes in
             the servers' command lines and env; model.py: the model, made once per image)
sim/         worker simulators behind the real router (bundle/simulator/ is the program they run)
registry.py  the modes, `--rehearsal` parsed once into one of them

What every mode shares stays in the core: the rehearsal image (bundle/images/rehearsal.py) and the env a
rehearsal adds to the real topology (bundle/render/rehearsal.py), which the Slurm rehearsal reads too.
"""
