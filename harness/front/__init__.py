"""The front doors: the pytest plugin (``plugin``, light, and ``collection``), the command
line (``cli``), generated exploration (``explore``) and the kill matrix (``mutation``), all
on top of ``cases``, which takes each case through plan, lives, observation and verdict."""
