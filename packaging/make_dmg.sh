#!/usr/bin/env bash
# Make dist/Engram-<version>.dmg from dist/Engram.app: a compressed disk image with the app and an
# Applications link, so the user drags Engram into Applications. macOS only (hdiutil).
# Usage: packaging/make_dmg.sh [dist-folder]   (after `pyinstaller packaging/engram.spec`)
set -euo pipefail

DIST="${1:-dist}"
APP="$DIST/Engram.app"
[[ -d "$APP" ]] || { echo "make_dmg: $APP not found; build it first: pyinstaller packaging/engram.spec" >&2; exit 1; }
PLISTBUDDY="${PLISTBUDDY:-/usr/libexec/PlistBuddy}"
VERSION="$("$PLISTBUDDY" -c 'Print :CFBundleShortVersionString' "$APP/Contents/Info.plist")"
DMG="$DIST/Engram-$VERSION.dmg"

STAGE="$(mktemp -d)"
trap 'rm -rf "$STAGE"' EXIT
# ditto keeps symlinks, extended attributes and the code signature intact (cp -R may not)
ditto "$APP" "$STAGE/Engram.app"
ln -s /Applications "$STAGE/Applications"

# hdiutil create fails now and then with "Resource busy" on GitHub's macOS runners (actions/runner-images#7522):
# a bounded number of attempts, further apart each time; the last failure ends the script with hdiutil's status.
ATTEMPTS="${DMG_ATTEMPTS:-5}"
PAUSE="${DMG_RETRY_SECONDS:-5}"
for attempt in $(seq 1 "$ATTEMPTS"); do
  rm -f "$DMG"
  status=0
  hdiutil create -volname "Engram $VERSION" -srcfolder "$STAGE" -fs HFS+ -format UDZO -imagekey zlib-level=9 \
    "$DMG" || status=$?
  [[ $status -eq 0 ]] && break
  if [[ $attempt -eq $ATTEMPTS ]]; then
    echo "make_dmg: hdiutil create failed $ATTEMPTS times (last status $status)" >&2
    exit "$status"
  fi
  echo "make_dmg: hdiutil create failed (status $status), attempt $attempt of $ATTEMPTS; again in $((PAUSE * attempt)) s" >&2
  sleep $((PAUSE * attempt))
done
if [[ -n "${CODESIGN_IDENTITY:-}" ]]; then
  codesign --sign "$CODESIGN_IDENTITY" --timestamp "$DMG"
fi
echo "$DMG"
