"""``refka lab run PLAN.yaml``: timed plans of operations and faults run against a running
cluster through its admin HTTP API (``refka serve --admin-port``), under a load of refka's own
client, written down as a timeline. ``plan.py`` the plan format and its checks,
``conditions.py`` the waits' conditions, ``load.py`` the load, ``timeline.py`` the timeline
file, ``runner.py`` running a plan, ``api.py`` the admin API (``refka admin``'s helper),
``cli.py`` the command. A client of the admin API and of the Kafka protocol like
``refka admin`` and ``refka topics``: nothing of the broker's is imported."""
