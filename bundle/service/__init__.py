"""The services below the verbs: typed values in, the work done. A verb in bundle/commands/ parses its
flags into these values and calls a service; `bundle tune` calls the same services for each candidate.
No argparse namespace reaches this package or anything below it.

prepare.py  the one path from bundle.yaml to a checked render (load -> render -> rules), the rehearsal's
            additions to the env computed in one place
launch.py   LaunchRequest -> the stack up, ready, attested (reconciles one that is up)
smoke.py    the smoke test of a launched topology, its identity and its report
bench.py    bench_serving against a launched topology, and "the stack went away" while it runs
"""
