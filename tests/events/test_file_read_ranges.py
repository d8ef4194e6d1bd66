"""A file log read from the file (not its recent window) gives exactly the asked seqs,
wherever a range starts or ends inside a record, and record by record as written."""

from trio_cap.events.kinds import TextChunk
from trio_cap.events.log import FileEventLog


async def test_every_range_of_a_reopened_log_is_the_slice_of_the_whole(tmp_path):
    path = tmp_path / "x.caplog"
    log = FileEventLog(path, fsync="never")
    for n in range(1, 13):  # records of 1 … 12 events, on alternating streams
        await log.append([TextChunk(message_id="m", text=f"{n}.{k}") for k in range(n)],
                         stream=f"s{n % 2}")
    await log.aclose()
    log = FileEventLog(path, readonly=True)
    whole = log.read()
    assert [e.seq for e in whole] == list(range(1, 79))
    for lo in range(1, 79):
        for hi in range(lo, 79, 5):
            assert log.read(lo, until=hi) == whole[lo - 1 : hi], (lo, hi)
    assert [e.seq for e in log.read(20, "s1", until=40)] == [
        e.seq for e in whole[19:40] if e.stream == "s1"]
    log.close()
