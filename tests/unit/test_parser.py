from nodes.commands import parse_commands, registry


def test_canonical_hmp_block():
    text = (
        'I will greet.\n# Commands:\n[{"cmd_id": "t12-1", "type": "messages.send", "args": {"text": "Good morning!"},'
        ' "description": "greet"},\n {"cmd_id": "t12-2", "type": "diary.add", "args": {"text": "x", "tags": ["sea"]}}]\n'  # noqa: E501
        "# End commands\nafter"
    )
    result = parse_commands(text, 12)
    assert [c.cmd_id for c in result.commands] == ["t12-1", "t12-2"]
    assert result.commands[0].type == "messages.send" and result.commands[0].args == {"text": "Good morning!"}
    assert result.commands[0].description == "greet"
    assert result.commands[1].args["tags"] == ["sea"]
    assert result.errors == []
    assert result.body == "I will greet.\n\nafter"


def test_missing_end_marker_single_object_and_missing_id():
    result = parse_commands('hm\n# Commands:\n{"type": "notes.add", "args": {"text": "x"}}', 7)
    assert len(result.commands) == 1
    assert result.commands[0].cmd_id == "t7-1"
    assert any("no end marker" in e for e in result.errors)


def test_trailing_prose_after_json_is_ignored():
    result = parse_commands(
        '# Commands:\n[{"type": "cycle.pause", "args": {"seconds": 3}}] and then I rest\n# End commands', 1
    )
    assert result.commands[0].args == {"seconds": 3}
    assert result.errors == []


def test_broken_json_is_repaired_and_reported():
    result = parse_commands("# Commands:\n[{'type': 'messages.send', 'args': {'text': 'hi',},},\n# End commands", 2)
    assert result.commands[0].type == "messages.send" and result.commands[0].args["text"] == "hi"
    assert "repaired malformed JSON" in result.errors


def test_unparseable_block_is_logged_not_raised():
    result = parse_commands("# Commands:\nno json here at all\n# End commands", 3)
    assert result.commands == []
    assert any("no JSON" in e for e in result.errors)


def test_tool_call_tags_with_aliases_and_unclosed_tag():
    text = (
        'thinking <tool_call>{"name": "message", "arguments": {"text": "hello"}}</tool_call> more '
        '<tool_call>{"name": "search", "arguments": {"query": "sea"}}'
    )
    result = parse_commands(text, 5, aliases=registry().aliases)
    assert [c.type for c in result.commands] == ["messages.send", "search.query"]
    assert result.commands[1].args == {"query": "sea"}
    assert [c.syntax for c in result.commands] == ["tool_call", "tool_call"]
    assert "<tool_call>" not in result.body


def test_native_tool_calls_and_flat_args_and_space_types():
    result = parse_commands(
        '# Commands:\n[{"type": "llm_memory add", "text": "remember"}]\n# End commands',
        4,
        native_tool_calls=[{"name": "notes.add", "args": {"text": "n"}, "id": "call_1"}],
    )
    assert result.commands[0].type == "llm_memory.add" and result.commands[0].args == {"text": "remember"}
    assert result.commands[1].cmd_id == "call_1" and result.commands[1].syntax == "native"


def test_russian_markers_and_duplicate_ids():
    text = '# Команды:\n[{"cmd_id": "a", "type": "notes.add", "args": {}}, {"cmd_id": "a", "type": "notes.add", "args": {}}]\n# Конец команд'  # noqa: E501
    result = parse_commands(text, 1)
    assert [c.cmd_id for c in result.commands] == ["a", "a#2"]


def test_command_without_type_is_an_error():
    result = parse_commands('# Commands:\n[{"args": {"text": "x"}}, 5]\n# End commands', 1)
    assert result.commands == []
    assert any("without a type" in e for e in result.errors)
    assert any("not an object" in e for e in result.errors)


def test_emotion_parsing_json_loose_and_truncated():
    from nodes.reflexes.emotion import parse_emotions

    assert parse_emotions('{"emotions": [{"emotion": "Joy", "strength": 4, "reason": "sun"}]}') == [("joy", 4, "sun")]
    assert parse_emotions('emotions: ["curiosity:3 (a new idea)", "i:1", "calm:2"]') == [
        ("curiosity", 3, "a new idea"),
        ("calm", 2, ""),
    ]
    cut = '{"emotions": [{"emotion": "awe", "reason": "x", "strength": 5}, {"emotion": "calm", "reason": "I wond'
    assert parse_emotions(cut) == [("awe", 5, "x")]
    assert parse_emotions("nothing here") == []
