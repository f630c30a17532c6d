"""The transcript records: one writer and one reader per kind, versioned; older play files still read."""

import json

import pytest

from heuresis.artifacts.transcripts import (
    EpisodeTranscript,
    PlayTranscript,
    TranscriptProblem,
    read_episode_transcript,
    read_play_transcript,
)

MESSAGES = [{"role": "system", "content": "s"}, {"role": "user", "content": "u"},
            {"role": "assistant", "content": None, "tool_calls": [{"id": "c1"}]}]
CALLS = [{"turn": 1, "index": 0, "call_id": "c1", "tool": "submit", "arguments": "{}", "result": "ok", "ok": True,
          "error": None, "details": None}]


def _episode(**kw) -> EpisodeTranscript:
    return EpisodeTranscript(
        episode={"episode_id": "a/c/lg/dev/0000"}, condition={"guided": False},
        budgets={"limits": {"turns": 3}, "used": {"turns": 1}, "setting": "standard"}, agent_origin=None,
        algorithm_map={"algorithm_A": "pc_kci"}, algorithm_map_given_to_agent=False, start_graph="complete",
        deletion_log_shown=None, tools=[{"type": "function"}], messages=MESSAGES, calls=CALLS,
        requests=[{"turn": 1, "tokens_in": 5}], **kw)


def test_an_episode_record_reads_back_equal_with_its_version_first(tmp_path):
    rec = _episode(error={"error": "boom"}, secrets={"salt": "public"})
    path = rec.write(tmp_path / "0000.json")
    raw = json.loads(path.read_text())
    assert next(iter(raw)) == "transcript_version" and raw["transcript_version"] == 1
    assert "agent_record" not in raw and raw["error"] == {"error": "boom"}     # unset optional fields are left out
    back = read_episode_transcript(path)
    assert back.path == path and back.version == 1
    assert {**vars(back), "path": None} == {**vars(rec), "path": None}


def test_an_episode_file_of_the_version_1_layout_without_the_optional_fields_reads(tmp_path):
    """The layout as the harness first wrote it: no agent_origin, no secrets, no error."""
    raw = {k: v for k, v in _episode().to_json().items() if k not in ("agent_origin", "tools", "start_graph")}
    (tmp_path / "t.json").write_text(json.dumps(raw))
    back = read_episode_transcript(tmp_path / "t.json")
    assert back.calls == CALLS and back.messages == MESSAGES and back.agent_origin is None
    assert back.start_graph == "complete" and back.tools == []


@pytest.mark.parametrize("change, message", [
    (lambda d: {k: v for k, v in d.items() if k != "transcript_version"}, "has no transcript_version"),
    (lambda d: {**d, "transcript_version": 2}, "is of layout version 2"),
    (lambda d: {k: v for k, v in d.items() if k != "calls"}, "'calls' is a required property"),
])
def test_an_episode_file_of_another_layout_is_refused_by_name(tmp_path, change, message):
    (tmp_path / "t.json").write_text(json.dumps(change(_episode().to_json())))
    with pytest.raises(TranscriptProblem, match=message) as err:
        read_episode_transcript(tmp_path / "t.json")
    assert str(tmp_path / "t.json") in str(err.value)


def test_a_play_record_is_versioned_and_an_unversioned_play_file_reads_as_version_0(tmp_path):
    rec = PlayTranscript({"play_id": "p/agentic/antenna_trap/r0"}, scenario={"name": "antenna_trap"},
                         tools=[], messages=MESSAGES, calls=[{"tool": "deploy"}])
    path = rec.write(tmp_path / "r0.json")
    raw = json.loads(path.read_text())
    assert raw["transcript_version"] == 1 and "error" not in raw and "requests" not in raw
    assert {**vars(read_play_transcript(path)), "path": None} == {**vars(rec), "path": None}
    old = {k: v for k, v in raw.items() if k != "transcript_version"}   # as plays were written before versions
    (tmp_path / "old.json").write_text(json.dumps(old))
    back = read_play_transcript(tmp_path / "old.json")
    assert back.version == 0 and back.messages == MESSAGES and back.calls == [{"tool": "deploy"}]
    failed = PlayTranscript.failed({"play_id": "x"}, "Traceback ...").write(tmp_path / "f.json")
    assert json.loads(failed.read_text()) == {"transcript_version": 1, "play": {"play_id": "x"},
                                              "messages": [], "calls": [], "error": "Traceback ..."}
