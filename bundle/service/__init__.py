"""The services below the verbs: typed values in, typed results out, the work done. A verb in
bundle/commands/ parses its flags into a request, calls a service, prints its result and maps it to an
exit code; `bundle tune` calls the same services for each candidate. No argparse namespace reaches this
package or anything below it, and nothing here prints but on the Reporter the verb passes in
(bundle/reporter.py; tests/test_no_print.py holds it).

prepare.py       the one path from bundle.yaml to a checked render (load -> render -> rules), the
                 rehearsal's additions to the env computed in one place
render.py        a render target's checked output; compose's render resolved by compose; a folder written
launch.py        LaunchRequest -> the stack up, ready, attested (reconciles one that is up); the compose
                 target's launcher (the Slurm one is its wing's: bundle/targets/slurm/launch.py)
smoke.py         the smoke test of a launched topology, its identity and its report
bench.py         BenchRequest -> bench_serving's levels or a soak against a launched topology, the gate
audit.py         AuditRequest -> the image checked from inside, its report saved
verify.py        the running containers held to the lock
doctor.py        DoctorRequest -> the host's preflight report

`bundle tune`'s service sits above these, in the tune stage (bundle/tune/service.py): it runs them.
`bundle upgrade`'s is its own stage's (bundle/upgrade/service.py), below them.
"""
