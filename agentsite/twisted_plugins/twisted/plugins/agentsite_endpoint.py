"""The ``agentsite:`` server endpoint (agentsite/body_limit.py), as a Twisted plugin.

Twisted finds endpoint types in every ``twisted/plugins`` directory on ``sys.path``;
``agentsite-server`` puts ``agentsite/twisted_plugins`` there (agentsite/server.py). This
directory has no ``__init__.py`` on purpose: it is a plugin directory, not a package.
"""

from agentsite.body_limit import BodyLimitParser

parser = BodyLimitParser()
