"""The library behind the commands: each command calls one function here.

Everything the CLI does is reachable without click: ``Settings`` carries the
global options, manifests come loaded (``manifests.load``) and saved plans
read (``planfile.read``) by the caller.  Each name is imported from the module
that holds it, so a command loads what it runs and nothing more (a plan never
loads apply's engine, its preflight or the state commands):

    workspace.py       the state as one operation opens it: Workspace, read_snapshot
    endpoint.py        the endpoint as the state records it (normal_endpoint); a
                       rejected key
    observing.py       what is read from the server: the refresh, live references
    planning.py        plan, planned (the agent's), Planned
    saving.py          write_plan (plan --out), inspect_saved (show)
    drifting.py        drift
    sources.py         what an apply applies: Manifests, Saved, Reviewed; ApplyOptions
    preflight.py       every check before anything is sent: Preflight, required,
                       AuditFields
    applying.py        apply: the lock, preflight, then one client sends and records
    state_commands.py  govsync state ... (state_entry, state_import ...), audit_export
"""
