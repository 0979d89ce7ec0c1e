"""Attack suites: a log, a tape or a plugin made by someone who means harm, fed to arena as a
user would, and what must come of it (a one-line error, a recorded rejection, the same
figures), never a forged number printed as if whole, a traceback or a hang."""
