"""What every rehearsal mode shares, below the modes: the rehearsal image (image.py: its tag from its inputs,
its build) and what a rehearsal adds to the rendered env of the real topology (env.py: the image, the
simulated model folder, short health waits, host-grantable limits, the simulator's knobs), which the Slurm
rehearsal cluster reads too."""
