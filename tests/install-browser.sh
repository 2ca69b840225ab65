#!/usr/bin/env bash
# Make Debian's chromium available for the real-browser test (tests/browser).
# Installs it with apt when missing and running as root; never downloads a browser build.
# In CI (CI=true) a failed install is an error, so a skipped browser test cannot hide it.
set -u
if [ -x /usr/bin/chromium ]; then
  exit 0
fi
if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
  if (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium) >/dev/null; then
    exit 0
  fi
fi
if [ "${CI:-}" = "true" ]; then
  echo "install-browser: could not install Debian's chromium; the browser test needs /usr/bin/chromium" >&2
  exit 1
fi
echo "install-browser: /usr/bin/chromium is absent (apt-get install chromium); the browser test will be skipped" >&2
exit 0
