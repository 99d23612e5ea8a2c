#!/usr/bin/env bash
# Make dist/Engram-<version>.dmg from dist/Engram.app: a compressed disk image with the app and an
# Applications link, so the user drags Engram into Applications. macOS only (hdiutil).
# Usage: packaging/make_dmg.sh [dist-folder]   (after `pyinstaller packaging/engram.spec`)
set -euo pipefail

DIST="${1:-dist}"
APP="$DIST/Engram.app"
[[ -d "$APP" ]] || { echo "make_dmg: $APP not found; build it first: pyinstaller packaging/engram.spec" >&2; exit 1; }
VERSION="$(/usr/libexec/PlistBuddy -c 'Print :CFBundleShortVersionString' "$APP/Contents/Info.plist")"
DMG="$DIST/Engram-$VERSION.dmg"

STAGE="$(mktemp -d)"
trap 'rm -rf "$STAGE"' EXIT
# ditto keeps symlinks, extended attributes and the code signature intact (cp -R may not)
ditto "$APP" "$STAGE/Engram.app"
ln -s /Applications "$STAGE/Applications"

rm -f "$DMG"
hdiutil create -volname "Engram $VERSION" -srcfolder "$STAGE" -fs HFS+ -format UDZO -imagekey zlib-level=9 "$DMG"
if [[ -n "${CODESIGN_IDENTITY:-}" ]]; then
  codesign --sign "$CODESIGN_IDENTITY" --timestamp "$DMG"
fi
echo "$DMG"
