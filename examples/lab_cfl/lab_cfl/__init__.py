"""An example lab's plug-ins for cfl-pipeline (docs/extending.md): a method (:mod:`.strategy`), a split generator
(:mod:`.split`) and a paper check (:mod:`.paper`), each declared as an entry point in ``pyproject.toml``. Importing
the package imports none of them: a job imports only the plug-in it selects."""
