#!/bin/sh
# The main job, end to end, against the embedded reference server:
# validate, test the policies' code, plan (with the policies' impact on a week of
# recorded requests), apply, then plan again (no changes) and drift (in sync).
# Runs in a fresh temporary directory so every run starts from nothing.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"

# Dummy values for the example integrations' secrets ({fromEnv: ...}).
: "${GOVSYNC_EXAMPLE_LOGSTORE_API_KEY:=demo-logstore-key}"
: "${GOVSYNC_EXAMPLE_BI_API_KEY:=demo-bi-key}"
: "${GOVSYNC_EXAMPLE_BI_API_SECRET:=demo-bi-secret}"
: "${GOVSYNC_EXAMPLE_MDM_API_KEY:=demo-mdm-key}"
: "${GOVSYNC_EXAMPLE_AI_PROVIDER_API_KEY:=demo-ai-key}"
export GOVSYNC_EXAMPLE_LOGSTORE_API_KEY GOVSYNC_EXAMPLE_BI_API_KEY \
  GOVSYNC_EXAMPLE_BI_API_SECRET GOVSYNC_EXAMPLE_MDM_API_KEY GOVSYNC_EXAMPLE_AI_PROVIDER_API_KEY
export GOVSYNC_ENDPOINT=local GOVSYNC_LOCAL_SEED="$here/server-seed.yaml"

echo "== govsync validate"
govsync validate "$here/manifests"
echo "== govsync test"
govsync test "$here/manifests"
echo "== govsync plan --impact-from recorded-requests.jsonl --out plan.json"
govsync plan "$here/manifests" --impact-from "$here/recorded-requests.jsonl" --out plan.json
echo "== govsync apply plan.json"
govsync apply plan.json --auto-approve
echo "== govsync plan --detailed-exitcode (expect no changes)"
govsync plan "$here/manifests" --detailed-exitcode
echo "== govsync drift"
govsync drift "$here/manifests"
