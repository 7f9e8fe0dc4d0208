"""What each field of a manifest's spec means: the text editors show on hover.

One source for the manifest schema's descriptions (``schema.py`` writes them
into ``schemas/manifest.schema.json``), read from the API spec's field tables
(shared/api-spec.md, "Resources and fields") and the contract (section 1: the
names govsync gives to fields the spec leaves unnamed, references, secrets).
A field is described by its name wherever it appears; ``MODEL_FIELDS`` gives
the meaning where one name means different things in different models
(``id``, ``name``, ``status``...).  A test requires a description for every
field of every kind.
"""

from __future__ import annotations

from govsync.policycode.stages import PACKAGES, STAGES, Role

_PROTECTED = ("Whether the API refuses to delete the object while it is true "
              "(terminationProtection).")
_POLICY_CODE = (
    f"The policy's code: a Rego module in package {PACKAGES[Role.POLICY]} (Rego v0 with the "
    "future.keywords imports, or v1), which the service evaluates at up to three stages, "
    "each a rule whose value is a decision object: "
    + "; ".join(f"{row.stage} ({row.when}: action {', '.join(row.actions)})" for row in STAGES)
    + ". A hook's result is input.hooks.<hook name>, a policy data loader's data "
    "data.<key>. validate compiles it.")

FIELDS: dict[str, str] = {
    # -- on many kinds
    "description": "A human-readable description of the object.",
    "terminationProtection": _PROTECTED,
    "code": "The object's source code (at least one character).",
    "status": "The object's status: draft, or active.",
    "name": "A name (at least one character).",
    # -- references (contract section 1): the id, or the metadata.name of the object
    "spaceId": "The id of the Space it belongs to (null: none). Or spaceRef.",
    "spaceRef": "metadata.name of the Space in the manifests it belongs to (instead of "
                "spaceId); its id is filled in at apply.",
    "connectorId": "The id of the Connector. Or connectorRef.",
    "connectorRef": "metadata.name of the Connector in the manifests (instead of "
                    "connectorId); its id is filled in at apply.",
    "policyId": "The id of the Policy. Or policyRef.",
    "policyRef": "metadata.name of the Policy in the manifests (instead of policyId); its "
                 "id is filled in at apply.",
    "nativeUserId": "The id of the native user the discovery connects as. Or nativeUserRef.",
    "nativeUserRef": "metadata.name of the NativeUser in the manifests (instead of "
                     "nativeUserId).",
    "linkedDbUserId": "The id of the native user the BI tool's queries run as. Or "
                      "linkedDbUserRef.",
    "linkedDbUserRef": "metadata.name of the NativeUser in the manifests (instead of "
                       "linkedDbUserId).",
    "resourceId": "The id of the resource (a database, a cluster, a host) on the server.",
    "identityId": "The id of the identity (a user) the suspension applies to.",
    "sessionId": "The id of the session to end.",
    "machineUserId": "The id of the machine user the command runs as.",
    # -- secrets (contract section 1): {fromEnv: VARIABLE}, never a literal
    "apiKey": "The API key: {fromEnv: VARIABLE}, read from govsync's environment "
              "(a literal is refused; never shown or stored).",
    "accessToken": "The access token: {fromEnv: VARIABLE} (never shown or stored).",
    "password": "The password: {fromEnv: VARIABLE} (never shown or stored).",
    "biAApiKey": "The biA API key: {fromEnv: VARIABLE} (never shown or stored).",
    "biAApiSecret": "The biA API secret: {fromEnv: VARIABLE} (never shown or stored).",
    "fromEnv": "The name of the environment variable of govsync's process that holds "
               "the secret.",
    "var": "The name of a project variable (govsync.yaml vars, the environment's vars "
           "or --var NAME=VALUE) whose value goes here.",
    # -- Sidecar
    "hostname": "The host name the sidecar (or BI tool) is reached at.",
    "technology": "What the sidecar connects to (its technology).",
    # -- Satellite
    "satelliteType": "The kind of satellite.",
    # -- ResourceAlias
    "alias": "Another name for the resource.",
    # -- NativeUser: exactly one credential variant
    "credentials": "How the native user signs in to the resource: exactly one variant "
                   "(cloudIamA, cloudIamARole, cloudIamB, cloudIamC, hook, "
                   "unauthenticated).",
    "label": "A label for people.",
    "cloudIamA": "Sign in with cloud IAM A: a username.",
    "cloudIamARole": "Sign in with cloud IAM A through a role: a username and a role.",
    "cloudIamB": "Sign in with cloud IAM B: a username.",
    "cloudIamC": "Sign in with cloud IAM C: a username.",
    "hook": "Sign in through a hook: the hook, the environment variables and network "
            "hosts it may use.",
    "unauthenticated": "No credentials: an empty mapping, {}.",
    "username": "The user name to sign in as.",
    "role": "The role to assume.",
    "allowlistedEnvVariables": "The environment variables the hook may read.",
    # -- DataDiscoveryConfiguration
    "database": "The database to discover.",
    "schedule": "When the discovery runs (at least one character).",
    "deletionPolicy": "What happens to data no longer found: delete, or "
                      "mark_for_deletion.",
    "path": "The path inside the resource to discover (null: all of it).",
    # -- Policy
    "groupName": "The group that owns the policy (exactly one of groupName and "
                 "userEmail).",
    "userEmail": "The user who owns the policy (exactly one of userEmail and groupName).",
    "notification": "Who is notified: none, consumer, owners, or all.",
    # -- PolicySuspension
    "expirationMinutes": "How many minutes the suspension lasts.",
    "inputCondition": "The condition on the request's input under which the policy is "
                      "suspended.",
    "oneoff": "Whether the suspension applies to one request only.",
    "reason": "Why the policy is suspended.",
    # -- PolicyReport
    "policyCode": "The policy code the report evaluates.",
    "evaluationWindow": "The time window of logs the report evaluates.",
    "logQuery": "The log query that selects the events evaluated.",
    # -- PolicyDataLoader
    "key": "The key under which the loaded data is available to policies.",
    "workerCode": "The loader's code (at least one character).",
    "workerSchedule": "When the loader runs (at least nine characters).",
    "workerRuntime": "The loader's runtime: python3.11, or nodejs18.x.",
    # -- Hook
    "timeoutMs": "How long the hook may run, in milliseconds (at most 60000).",
    "allowlistedEnvironmentVariables": "The environment variables the hook may read "
                                       "(each a name such as MY_VAR).",
    "allowlistedNetworkHosts": "The network hosts the hook may reach.",
    # -- LogIntegration: exactly one destination
    "logStoreA": "Send logs to log store A: a bucket (bucketName, cloudIntegrationId, "
                 "bucketPrefix).",
    "logStoreB": "Send logs to log store B: site, accountId and apiKey.",
    "logStoreC": "Send logs to log store C: a bucket (cloudIntegrationId, bucketName, "
                 "bucketPrefix).",
    "logStoreD": "Send logs to log store D: host, port and accessToken.",
    "bucketName": "The bucket that receives the logs.",
    "bucketPrefix": "The prefix of the objects written to the bucket.",
    "cloudIntegrationId": "The id of the cloud integration that grants access to the "
                          "bucket.",
    "site": "The log store's site (its region's host name).",
    "accountId": "The account at the log store.",
    "host": "The log store's host.",
    "port": "The log store's port.",
    # -- BIIntegration: exactly one variant
    "biA": "BI tool A: its API key and secret (biAApiKey, biAApiSecret).",
    "biB": "BI tool B: hostname, username and password.",
    "biC": "BI tool C: an empty mapping, {}.",
    "sync": "Whether the BI tool's users and groups are synchronised.",
    # -- MDMIntegration: exactly one variant
    "mdmA": "Device management A: apiKey and apiUrl.",
    "mdmB": "Device management B: clientId, apiKey and apiUrl.",
    "mdmC": "Device management C: apiKey and apiUrl.",
    "apiUrl": "The URL of the device management API.",
    "clientId": "The client id at the device management service.",
    # -- AIProviderIntegration
    "keyName": "A name for the API key, for people.",
    "provider": "The AI provider and its plan (AI_PROVIDER_...).",
    "providerOrganizationId": "Your organisation's id at the AI provider.",
    # -- ConnectorAIProvider: config holds exactly one variant
    "config": "The AI provider the connector uses: exactly one of providerA to "
              "providerG, each a mapping.",
    "providerA": "Cloud model service A (its fields are the API's).",
    "providerB": "Cloud model service B (its fields are the API's).",
    "providerC": "Cloud model service C (its fields are the API's).",
    "providerD": "Cloud AI service D (its fields are the API's).",
    "providerE": "Vendor API E (its fields are the API's).",
    "providerF": "Vendor API F (its fields are the API's).",
    "providerG": "The service's own satellite G (its fields are the API's).",
    # -- SigningKey
    "publicKey": "The public key (at least one character).",
    "algorithm": "The key's algorithm: ecdsa-p384, ed25519, or ml-dsa-87.",
    # -- DataLabel
    "classifierType": "How data is recognised: regex, or prompt.",
    "classifierData": "The regular expression or the prompt (at least one character).",
    # -- LogQuery
    "query": "The saved query: its text, filters, time range, grouping and aggregation.",
    "filters": "Filters on the events: each a field name and the values it may have.",
    "values": "The values the field may have.",
    "relativeTime": "How far back the query looks (the API's relative time).",
    "histogramGroupByFields": "The fields the histogram groups by.",
    "metricAggregation": "The field whose values are aggregated.",
    "field": "A field of the events.",
    # -- Form
    "fields": "The form's fields, in order.",
    "type": "The field's type.",
    "options": "The fixed choices: each a label and a value.",
    "optionsSource": "Where the choices come from: an app's command run as a machine user.",
    "app": "The app that lists the choices.",
    "command": "The app's command that lists the choices.",
    "input": "The command's input (a mapping).",
    "transform": "How the command's output becomes choices.",
    "value": "The value sent when the choice is made.",
    # -- ScenarioMonitor
    "scenario": "The scenario to monitor (an SSH session's steps).",
    # -- directives (contract sections 5 and 6)
    "target": "The address Kind/name of the document whose spec the patch changes.",
    "merge": "The target's spec fields to set (RFC 7386): null removes a field.",
    "from": "The address Kind/name recorded in state.",
    "to": "The address Kind/name it becomes.",
}

# Where a field's meaning depends on the model it is in: "Model.field".
MODEL_FIELDS: dict[str, str] = {
    "ImportSpec.id": "The object's id on the server (not blank).",
    "ImportSpec.to": "The address Kind/name in the manifests that adopts the object.",
    "ConnectorListenerLinkSpec.id": "The id of the existing connector listener link.",
    "SidecarResourceLinkSpec.id": "The id of the existing sidecar resource link.",
    "BlockedUserSpec.id": "The id of the user to block.",
    "FormField.id": "The form field's id.",
    "FormField.name": "The form field's name.",
    "FormField.config": "The field's choices: fixed options, or a source that lists them.",
    "FormOption.label": "What the choice shows.",
    "LogQueryFilter.name": "The field the filter applies to.",
    "FormOptionsSource.command": "The app's command that lists the choices: its name.",
    "PolicySpec.status": "The policy's status: draft, dry-run, or active.",
    "PolicySpec.code": _POLICY_CODE,
    "PermissionSpec.code": "The permission's code: a Rego module in package "
                           f"{PACKAGES[Role.PERMISSION]} (validate compiles it).",
    "HookSpec.code": "The hook's code: a JavaScript module whose default export is a "
                     "function, `export default function hook(input, env) { ... }`; "
                     "policies read what it returns as input.hooks.<hook name>. env holds "
                     "the allowlisted environment variables. validate parses it.",
    "HookSpec.status": "The hook's status: draft, or active.",
    "PolicyDataLoaderSpec.status": "The loader's status: draft, or active.",
    "PolicyDataLoaderSpec.key": "The key under which the loaded data is available to "
                                "policies (at least one character).",
    "ScenarioMonitorSpec.status": "The monitor's status: active, or draft.",
    "AIProviderIntegrationSpec.apiKey": "The AI provider's API key: {fromEnv: VARIABLE} "
                                        "(never shown or stored).",
    "HookCredential.hook": "The hook that provides the credentials.",
    "LogQuerySpec.query": "The saved query: its text, filters, time range, grouping and "
                          "aggregation.",
    "LogQueryBody.query": "The query's text.",
    "SessionTerminationSpec.connectorId": "The id of the Connector that holds the "
                                          "session. Or connectorRef.",
}


def describe(model: str, field: str) -> str | None:
    """What ``field`` of ``model`` (a schema definition's name) means, if known."""
    return MODEL_FIELDS.get(f"{model}.{field}") or FIELDS.get(field)
