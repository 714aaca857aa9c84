#!/bin/sh
# engram's fast path for a hook whose output the client never reads, in a client that waits for
# every hook (Codex's Stop, Gemini CLI's AfterAgent: neither has asynchronous hooks):
#
#     /bin/sh detach.sh ENGRAM hook EVENT --client CLIENT [--home ...]
#
# keeps the event's JSON in a private file (mktemp: mode 0600, under $TMPDIR), runs the command on
# it in the background, out of the client's session, and exits 0 at once with no output, so the
# agent waits for this shell instead of Python's start and engram's import. All the work and its
# guarantees (exclusion, redaction, incremental capture, never breaking the agent) stay in
# `engram hook`. Without a private file the command runs in the foreground: slower, never lost.
umask 077
event=$(mktemp "${TMPDIR:-/tmp}/engram-hook.XXXXXX" 2>/dev/null) || exec "$@"
if ! cat >"$event"; then
    rm -f "$event"
    exit 0
fi
# setsid where there is one (not on macOS): a client that kills its hook's process group, or a
# terminal that hangs up, does not end the capture; nohup's part is the ignored HUP.
own=
command -v setsid >/dev/null 2>&1 && own=setsid
# Every output to /dev/null: the client reads the hook's pipes until the last copy is closed.
$own sh -c 'trap "" HUP; "$@" <"$0" >/dev/null 2>&1; rm -f "$0"' "$event" "$@" </dev/null >/dev/null 2>&1 &
exit 0
