"""The rating's memo answers only an identical request, and stays bounded."""

from trio_cap.actors import risk
from trio_cap.actors.risk import rate


def test_a_repeated_request_is_rated_once_and_alike():
    first = rate("Bash", {"command": "ls -la"}, "execute", "/ws")
    again = rate("Bash", {"command": "ls -la"}, "execute", "/ws")
    assert again is first
    assert first.level == "low"


def test_the_memo_tells_apart_what_the_rating_reads():
    assert rate("Bash", {"command": "rm -rf x"}, "execute", "/ws").level == "high"
    assert rate("Bash", {"command": "ls"}, "execute", "/ws").level == "low"
    # same command, but in the background: a key in the intent changes the rating
    assert rate("Bash", {"command": "ls", "run_in_background": True}, "execute",
                "/ws").level == "high"
    assert rate("Bash", {"command": "ls", "run_in_background": 0}, "execute", "/ws").level == "low"
    # same path, another workspace
    assert rate("Write", {"path": "/ws/a.txt"}, None, "/ws").level == "medium"
    assert rate("Write", {"path": "/ws/a.txt"}, None, "/other").level == "high"


def test_a_symlink_fact_is_part_of_the_key():
    inside = rate("Write", {"path": "link/a.txt"}, None, "/ws")
    assert inside.level == "medium"
    escaped = rate("Write", {"path": "link/a.txt"}, None, "/ws", outside=inside.paths)
    assert escaped.level == "high"
    assert rate("Write", {"path": "link/a.txt"}, None, "/ws").level == "medium"


def test_an_intent_that_is_not_plain_data_is_rated_without_the_memo():
    class Odd:
        pass

    before = len(risk._RATED)
    assert rate("Write", {"path": Odd()}, None, "/ws").level == "high"
    assert len(risk._RATED) == before


def test_the_memo_is_bounded():
    for n in range(risk._RATED_MAX + 50):
        rate("Read", {"path": f"f{n}.txt"}, None, "/ws")
    assert len(risk._RATED) <= risk._RATED_MAX
    assert rate("Read", {"path": "f0.txt"}, None, "/ws").level == "low"
