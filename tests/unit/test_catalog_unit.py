"""The catalog's lifecycle rows against api-lifecycle.md's table, written out once more.

The table below is copied from ``shared/api-lifecycle.md`` ("Per kind"): a
typo in a row of the catalog (a response key, an operation's name, a scope)
fails here rather than against the real service.
"""

from __future__ import annotations

import pytest

from govsync.api.catalog import BY_NAME, LIFECYCLE, UpdateStyle, Verb
from govsync.api.kinds import BY_KIND, KINDS

# kind: (Get -> key, List -> key (scope, required), update (style), Delete -> answer)
G, L, U, D = "get", "list", "update", "delete"
TABLE: dict[str, dict[str, tuple[str, ...]]] = {
    "Space": {G: ("GetSpace", "space"), L: ("ListSpaces", "spaces", "search"),
              U: ("UpdateSpaceV2", "replace-all"), D: ("DeleteSpace", "id")},
    "Connector": {G: ("GetConnector", "Connector"),
                  L: ("ListConnectors", "connectors", "search", "spaceId"),
                  U: ("UpdateConnectorV2", "replace-all"), D: ("DeleteConnector", "id")},
    "Satellite": {G: ("GetSatellite", "satellite"),
                  L: ("ListSatellites", "satellites", "search", "spaceId"),
                  U: ("UpdateSatelliteV2", "replace-all", "satelliteType"),
                  D: ("DeleteSatellite", "id")},
    "Sidecar": {G: ("GetSidecar", "sidecar"), L: ("ListSidecars", "sidecars"),
                U: ("UpdateSidecar", "sparse", "technology"), D: ("DeleteSidecar", "id")},
    "ConnectorListenerLink": {
        G: ("GetConnectorListenerLink", "connectorListenerLink"),
        L: ("ListConnectorListenerLinks", "links", "required", "connectorId", "listenerId"),
        U: ("UpdateConnectorListenerLink", "sparse"), D: ("DeleteConnectorListenerLink", "id")},
    "SidecarResourceLink": {
        G: ("GetSidecarResourceLink", "link"),
        L: ("ListSidecarResourceLinks", "links", "required", "sidecarId", "resourceId"),
        U: ("UpdateSidecarResourceLink", "sparse"), D: ("DeleteSidecarResourceLink", "id")},
    "ResourceAlias": {U: ("UpdateResourceAlias", "sparse", "resourceId"),
                      D: ("DeleteResourceAlias", "empty")},
    "NativeUser": {G: ("GetNativeUserV3", "nativeUser"),
                   L: ("ListNativeUsersV3", "nativeUsers", "required", "resourceId"),
                   U: ("UpdateNativeUserV3", "sparse", "resourceId"),
                   D: ("DeleteNativeUserV3", "id")},
    "DataDiscoveryConfiguration": {
        G: ("GetDataDiscoveryConfiguration", "dataDiscoveryConfiguration"),
        L: ("ListDataDiscoveryConfigurations", "dataDiscoveryConfigurations", "required",
            "resourceId"),
        U: ("UpdateDataDiscoveryConfigurationV2", "replace-all", "resourceId"),
        D: ("DeleteDataDiscoveryConfiguration", "id")},
    "Policy": {G: ("GetPolicy", "policy"), L: ("ListPolicies", "policies", "search"),
               U: ("UpdatePolicyV2", "replace-all", "ast", "version"), D: ("DeletePolicy", "id")},
    "PolicySuspension": {G: ("GetPolicySuspension", "policySuspension"),
                         L: ("ListPolicySuspensions", "policySuspensions"),
                         D: ("DeletePolicySuspension", "id")},
    "PolicyReport": {G: ("GetPolicyReport", "report")},
    "PolicyDataLoader": {G: ("GetPolicyDataLoader", "policyDataLoader"),
                         L: ("ListPolicyDataLoaders", "policyDataLoaders", "search"),
                         U: ("UpdatePolicyDataLoaderV2", "replace-all"),
                         D: ("DeletePolicyDataLoader", "id")},
    "Hook": {G: ("GetHook", "hook"), L: ("ListHooks", "hooks", "search"),
             U: ("UpdateHook", "replace-all", "status"), D: ("DeleteHook", "id")},
    "Permission": {G: ("GetPermission", "permission"),
                   L: ("ListPermissions", "permissions", "search"),
                   U: ("UpdatePermissionV2", "replace-all"), D: ("DeletePermission", "id")},
    "LogIntegration": {G: ("GetIntegrationLog", "integration"),
                       L: ("ListIntegrationLogs", "integrations", "search"),
                       D: ("DeleteIntegrationLog", "id")},
    "BIIntegration": {G: ("GetBIIntegration", "integration"),
                      L: ("ListBIIntegrations", "integrations", "search"),
                      D: ("DeleteBIIntegration", "id")},
    "MDMIntegration": {G: ("GetIntegrationMDM", "integration"),
                       L: ("ListIntegrationsMDM", "integrations", "search"),
                       D: ("DeleteIntegrationMDM", "id")},
    "AIProviderIntegration": {G: ("GetIntegrationAIProvider", "integration"),
                              L: ("ListIntegrationsAIProvider", "integrations"),
                              D: ("DeleteIntegrationAIProvider", "id")},
    "ConnectorAIProvider": {G: ("GetConnectorAiProvider", "connectorAiProvider"),
                            U: ("UpdateConnectorAiProviderV2", "replace-all", "connectorId"),
                            D: ("DeleteConnectorAiProvider", "empty")},
    "SigningKey": {L: ("ListSigningKeys", "signingKeys"), U: ("UpdateSigningKey", "sparse", "name",
                                                                "publicKey", "algorithm"),
                   D: ("DeleteSigningKey", "id")},
    "DataLabel": {G: ("GetDataLabel", "dataLabel"), L: ("ListDataLabels", "dataLabels"),
                  U: ("UpdateDataLabelV2", "replace-all"), D: ("DeleteDataLabel", "id")},
    "LogQuery": {G: ("GetLogQuery", "metadata"), L: ("ListLogQueries", "savedQueries"),
                 U: ("UpdateLogQueryV2", "replace-all"), D: ("DeleteLogQuery", "empty")},
    "Form": {G: ("GetForm", "form"), L: ("ListForms", "forms", "search"),
             U: ("UpdateFormV2", "replace-all"), D: ("DeleteForm", "id")},
    "ScenarioMonitor": {G: ("GetScenarioMonitor", "monitor"),
                        L: ("ListScenarioMonitors", "monitors"),
                        U: ("UpdateScenarioMonitorV2", "replace-all"),
                        D: ("DeleteScenarioMonitor", "empty")},
    "SessionTermination": {},
    "BlockedUser": {G: ("GetBlockedUser", "top level"), D: ("DeleteBlockedUser", "id")},
}


def test_the_table_names_every_kind() -> None:
    assert set(TABLE) == {k.name for k in KINDS}


@pytest.mark.parametrize("name", sorted(TABLE))
def test_each_kind_has_the_operations_api_lifecycle_lists(name: str) -> None:
    kind, row = BY_KIND[name], TABLE[name]
    found: dict[str, tuple[str, ...]] = {}
    if kind.get:
        found[G] = (kind.get.name, kind.get.response_key or "top level")
        assert kind.get.retry_safe and kind.get.verb == Verb.GET
    if kind.list:
        lst = kind.list
        found[L] = (lst.name, str(lst.response_key), *(["search"] if lst.search else []),
                    *(["required"] if lst.scope_required else []),
                    *(s.field for s in lst.scope))
        assert lst.retry_safe and lst.verb == Verb.LIST
    if kind.update:
        update = kind.update
        assert update.style in (UpdateStyle.REPLACE_ALL, UpdateStyle.SPARSE)
        found[U] = (update.name, str(update.style), *update.read_only)
    if kind.delete:
        empty = "id" not in kind.delete.response.model_fields
        found[D] = (kind.delete.name, "empty" if empty else "id")
        assert not kind.delete.retry_safe
    assert found == row
    assert (kind.get_op, kind.list_op, kind.delete_op) == (
        row[G][0] if G in row else None, row[L][0] if L in row else None,
        row[D][0] if D in row else None)


def test_lifecycle_rows_are_not_the_spec_and_paths_are_unique() -> None:
    assert not any(op.spec for op in LIFECYCLE)
    assert len({op.path for op in BY_NAME.values()}) == len(BY_NAME)
