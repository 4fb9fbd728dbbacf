#!/usr/bin/env bash
# Prints the section of CHANGELOG.md for a release tag (## [X.Y.Z] ...)
# without its heading: the notes of the GitHub release. Prints nothing when
# CHANGELOG.md has no such section. Usage: hack/release-notes.sh TAG
set -euo pipefail
tag=${1:?usage: hack/release-notes.sh TAG}
cd "$(dirname "$0")/.."
awk -v heading="## [${tag#v}]" '
	/^## / { inside = index($0, heading) == 1; next }
	# The link definitions at the end of the file belong to no section.
	/^\[[^]]*\]: / { next }
	inside && (NF || started) { started = 1; print }
' CHANGELOG.md
