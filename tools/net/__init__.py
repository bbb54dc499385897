"""What the tools may reach on the network, and how they reach it.

- :mod:`tools.net.guard`: the SSRF guard, which URLs a tool may fetch and the exact
  address it may connect to;
- :mod:`tools.net.safehttp`: HTTP requests that honour the guard on every hop (redirects
  included), with size and time limits;
- :mod:`tools.net.reachability`: whether the public internet is reachable at all, so tools
  that need it are not offered without it.
"""
