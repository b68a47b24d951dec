"""The ``metashard`` command: the subcommand table (``main``) and the commands that run in this
process (``run`` and its ``supervisor``, ``rbac``, ``rollout``). Roles in other packages (the
worker, the embedded cluster, ``dev``) run as their own processes."""
