#!/bin/sh
# Re-vendor the pinned front-end packages from npm (run by a developer with registry access, never at run time),
# then rewrite VENDORED.json's hashes; tests/unit/test_web_assets.py checks the files against it.
set -e
cd "$(dirname "$0")"
tmp=$(mktemp -d)
(cd "$tmp" && npm pack htmx.org@2.0.11 htmx-ext-sse@2.2.4 uplot@1.6.32 @picocss/pico@2.1.1 swagger-ui-dist@5.35.0 >/dev/null)
for f in "$tmp"/*.tgz; do mkdir -p "${f%.tgz}" && tar xzf "$f" -C "${f%.tgz}"; done
cp "$tmp"/htmx.org-2.0.11/package/dist/htmx.min.js "$tmp"/htmx.org-2.0.11/package/LICENSE htmx-2.0.11/
cp "$tmp"/htmx-ext-sse-2.2.4/package/sse.js "$tmp"/htmx-ext-sse-2.2.4/package/LICENSE htmx-ext-sse-2.2.4/
cp "$tmp"/uplot-1.6.32/package/dist/uPlot.iife.min.js "$tmp"/uplot-1.6.32/package/dist/uPlot.min.css \
   "$tmp"/uplot-1.6.32/package/LICENSE uplot-1.6.32/
cp "$tmp"/picocss-pico-2.1.1/package/css/pico.min.css "$tmp"/picocss-pico-2.1.1/package/LICENSE.md pico-2.1.1/
s="$tmp"/swagger-ui-dist-5.35.0/package
cp "$s"/swagger-ui-bundle.js "$s"/swagger-ui-bundle.js.LICENSE.txt "$s"/swagger-ui.css "$s"/favicon-32x32.png \
   "$s"/LICENSE "$s"/NOTICE swagger-ui-dist-5.35.0/
rm -rf "$tmp"
echo "copied; update the sha256 values in VENDORED.json (sha256sum */*)"
