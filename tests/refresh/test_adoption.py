"""Adoption that reads: an ``Import`` document never overwrites what govsync could not
read (a secret), and is verified by a Get where the endpoint has one."""

from __future__ import annotations

from refreshkit import Gov, write

AI_KEY_VAR = "GOVSYNC_TEST_AI_KEY"
LIVE_KEY = "live-provider-key-0123456789"


def _connector_and_provider(gov: Gov) -> tuple[str, str]:
    """A connector and its AI provider, made in the console (not by govsync)."""
    connector = gov.call("CreateConnector", {"name": "console-made",
                                             "terminationProtection": False})["connector"]
    provider = gov.call("UpdateConnectorAiProviderV2", {"connectorAiProvider": {
        "connectorId": connector["id"],
        "config": {"providerA": {"model": "large-1", "apiKey": LIVE_KEY}}}})
    return connector["id"], provider["connectorAiProvider"]["id"]


def _adoption(gov: Gov, connector_id: str, provider_id: str, model: str = "large-1") -> None:
    write(gov.folder, "m/adopt.yaml", f"""\
        apiVersion: govsync/v1
        kind: Connector
        metadata: {{name: console-made}}
        spec: {{terminationProtection: false}}
        ---
        apiVersion: govsync/v1
        kind: Import
        metadata: {{name: adopt-connector}}
        spec: {{to: Connector/console-made, id: {connector_id}}}
        ---
        apiVersion: govsync/v1
        kind: ConnectorAIProvider
        metadata: {{name: console-made-ai}}
        spec:
          connectorRef: console-made
          config:
            providerA:
              model: {model}
              apiKey: {{fromEnv: {AI_KEY_VAR}}}
        ---
        apiVersion: govsync/v1
        kind: Import
        metadata: {{name: adopt-ai}}
        spec: {{to: ConnectorAIProvider/console-made-ai, id: {provider_id}}}
        """)


def test_import_never_overwrites_a_secret_it_could_not_read(gov: Gov) -> None:
    connector_id, provider_id = _connector_and_provider(gov)
    _adoption(gov, connector_id, provider_id)
    # The migration's placeholder, not the live key.
    gov.env[AI_KEY_VAR] = "REPLACE-ME"
    run = gov.ok("apply", "m", "--auto-approve")
    (live,) = [p for p in gov.objects("ConnectorAIProvider") if p["id"] == provider_id]
    assert live["config"]["providerA"]["apiKey"] == LIVE_KEY, run
    assert "REPLACE-ME" not in run.out + run.err
    entries = gov.entries()
    assert entries["ConnectorAIProvider/console-made-ai"]["id"] == provider_id
    # Adopted: planned again, nothing to do.
    again = gov.ok("plan", "m", "--detailed-exitcode", code=0)
    assert "No changes" in again.out, again
