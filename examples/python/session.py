#!/usr/bin/env python3
"""session: one agent session across two turns.

    session.py [--keep]

Turn one writes notes in the session's sandbox and suspends the session
with the conversation so far (the blob). Turn two resumes it, hot when the
parked sandbox is still there and trusted, cold from the checkpoint
otherwise, and reads the notes and the conversation back. The session is
deleted at the end unless --keep is given. Checkpoints are sealed with
HANGAR_SECRET_KEY.
"""

import sys

import hangar

HOW = {hangar.RESUME_NONE: "never", hangar.RESUME_HOT: "hot", hangar.RESUME_COLD: "cold",
       hangar.RESUME_FRESH: "fresh"}


def main(argv: list[str]) -> int:
    keep = "--keep" in argv[1:]
    ctx = hangar.Context()
    try:
        session = hangar.Session.create(ctx, labels={"example": "session"})
    except hangar.HangarError as e:
        print(f"session: create: {e}", file=sys.stderr)
        return 1
    print(f"session {session.id}")
    try:
        # Turn one.
        sb = session.sandbox()
        sb.write_file("/workspace/notes.txt", b"draft one\n")
        session.suspend(blob=b"user: keep the notes\n")
        state = session.info()
        print("suspended:", "parked" if state.state == hangar.SESSION_PARKED else "checkpointed")

        # Turn two, possibly in another process: Session.open(ctx, id) then resume().
        sb = session.resume()
        info = session.info()
        reason = f": {info.last_resume_reason}" if info.last_resume_reason else ""
        print(f"resumed {HOW[info.last_resume]}{reason}")
        print("notes:", sb.exec("cat /workspace/notes.txt").stdout.text, end="")
        blob = hangar.Checkpoint.lookup(ctx, info.checkpoint_id).read_blob()
        print("conversation:", blob.decode(), end="")
    except hangar.HangarError as e:
        print(f"session: {e}", file=sys.stderr)
        return 1
    finally:
        if not keep:
            session.delete()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
