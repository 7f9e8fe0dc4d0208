"""The environment variables govsync itself reads, and the defaults of its global
settings: each written once, here.

The bottom of the package: it imports nothing of govsync's, and every module
that names one of these variables or defaults takes it from here.
"""

from __future__ import annotations

import os
from typing import Final

# Defaults of the global settings (with a project file, the two files live beside it).
DEFAULT_STATE: Final = os.path.join(".govsync", "state.db")
# Where ``--endpoint local`` keeps the embedded server's objects.
LOCAL_DB: Final = os.path.join(".govsync", "local-api.db")
DEFAULT_WORKSPACE: Final = "default"

ENDPOINT: Final = "GOVSYNC_ENDPOINT"
API_KEY: Final = "GOVSYNC_API_KEY"
# The key impact reports are created and read with (plan --impact): one the team scopes to
# reports, so that a pull-request job never holds the apply key; unset: the command's key.
REPORT_API_KEY: Final = "GOVSYNC_REPORT_API_KEY"
STATE: Final = "GOVSYNC_STATE"
WORKSPACE: Final = "GOVSYNC_WORKSPACE"
ENV: Final = "GOVSYNC_ENV"
PROJECT: Final = "GOVSYNC_PROJECT"
LOG: Final = "GOVSYNC_LOG"
INSECURE_HTTP: Final = "GOVSYNC_INSECURE_HTTP"
LOCAL_SEED: Final = "GOVSYNC_LOCAL_SEED"
# ``spec``: the embedded server answers the spec's operations only (as
# ``govsync serve --operations spec``); default ``all``.
LOCAL_OPERATIONS: Final = "GOVSYNC_LOCAL_OPERATIONS"
INSTALL_SPEC: Final = "GOVSYNC_INSTALL_SPEC"
KEY_PASSPHRASE: Final = "GOVSYNC_KEY_PASSPHRASE"
ACTOR: Final = "GOVSYNC_ACTOR"
# The bearer token of the dashboard (`govsync ui`).
UI_TOKEN: Final = "GOVSYNC_UI_TOKEN"
# The agent: the secret of its push webhook (X-Hub-Signature-256), and the address
# where people reach it (for the links its notifications carry).
AGENT_WEBHOOK_SECRET: Final = "GOVSYNC_AGENT_WEBHOOK_SECRET"
AGENT_URL: Final = "GOVSYNC_AGENT_URL"
# The agent's operator says where its notification sinks may send (the repository
# never does): the hosts of webhook and Slack sinks, and the GitHub API.
AGENT_SINK_HOSTS: Final = "GOVSYNC_AGENT_SINK_HOSTS"
AGENT_GITHUB_API: Final = "GOVSYNC_AGENT_GITHUB_API"
# And, where it says so, the API endpoints the agent may reach (with an environment's key).
AGENT_ENDPOINTS: Final = "GOVSYNC_AGENT_ENDPOINTS"

# Every one of govsync's own settings: none may stand for a manifest's secret
# (``{fromEnv: GOVSYNC_API_KEY}`` would send govsync's own key to an integration).
OWN: Final = frozenset({ENDPOINT, API_KEY, REPORT_API_KEY, STATE, WORKSPACE, ENV, PROJECT, LOG, INSECURE_HTTP,
                        LOCAL_SEED, LOCAL_OPERATIONS, INSTALL_SPEC, KEY_PASSPHRASE, ACTOR,
                        UI_TOKEN, AGENT_WEBHOOK_SECRET, AGENT_URL, AGENT_SINK_HOSTS,
                        AGENT_GITHUB_API, AGENT_ENDPOINTS})
# Those of them that hold credentials: a value of one of these is never given to a
# notification sink, whatever variable the project file names.
CREDENTIALS: Final = frozenset({API_KEY, REPORT_API_KEY, STATE, KEY_PASSPHRASE, UI_TOKEN, AGENT_WEBHOOK_SECRET})
