"""The progress bar: drawn on a terminal, silent when piped and inside quiet() (what --json uses)."""
import io

from simdist.progress import Progress, quiet


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_draws_on_a_terminal_with_its_note():
    out = Terminal()
    bar = Progress(2, label="replicas", stream=out)
    bar.note = "3 cluster states simulated"
    bar.advance()
    bar.advance()
    bar.close()
    assert "2/2 replicas" in out.getvalue() and "3 cluster states simulated" in out.getvalue()


def test_silent_when_piped_or_quiet():
    piped = io.StringIO()
    Progress(1, stream=piped).advance()
    assert piped.getvalue() == ""
    out = Terminal()
    with quiet():
        bar = Progress(1, stream=out)
    bar.advance()
    assert out.getvalue() == ""
    with quiet(False):
        Progress(1, stream=out).advance()
    assert "1/1" in out.getvalue()


def test_a_delayed_bar_leaves_nothing_for_quick_work():
    out = Terminal()
    bar = Progress(3, stream=out, delay_s=60.0)
    bar.advance(3)
    bar.close()
    assert out.getvalue() == ""


def test_a_bar_inside_another_bars_work_stays_silent():
    out = Terminal()
    outer = Progress(2, label="cases", stream=out)
    inner = Progress(3, label="iterations", stream=out)
    inner.advance(3)
    inner.close()
    outer.advance(2)
    outer.close()
    assert "iterations" not in out.getvalue() and "2/2 cases" in out.getvalue()
    after = Progress(1, label="points", stream=out)  # once the outer one is closed, bars draw again
    after.advance()
    assert "1/1 points" in out.getvalue()


def test_status_shows_elapsed_time_on_a_terminal_then_wipes_its_line():
    from simdist.progress import Status

    out = Terminal()
    with Status("estimating big (16,384 GPUs)", stream=out, delay_s=0.0, interval_s=0.01):
        import time

        time.sleep(0.1)
    text = out.getvalue()
    assert "estimating big (16,384 GPUs)" in text and text.endswith("\r") and "\n" not in text
    assert text.rstrip("\r").split("\r")[-1].strip() == ""  # the last draw is the wipe


def test_status_silent_when_quick_piped_or_quiet():
    from simdist.progress import Status

    quick = Terminal()
    with Status("x", stream=quick, delay_s=60.0):
        pass
    assert quick.getvalue() == ""
    piped = io.StringIO()
    with Status("x", stream=piped, delay_s=0.0, interval_s=0.01):
        import time

        time.sleep(0.05)
    assert piped.getvalue() == ""
    out = Terminal()
    with quiet():
        with Status("x", stream=out, delay_s=0.0, interval_s=0.01):
            import time

            time.sleep(0.05)
    assert out.getvalue() == ""


def test_status_steps_aside_while_a_bar_draws():
    import time

    from simdist.progress import Status

    out = Terminal()
    bar = Progress(2, label="replicas", stream=out)
    with Status("estimating", stream=out, delay_s=0.0, interval_s=0.01):
        time.sleep(0.05)
        assert "estimating" not in out.getvalue()
        bar.advance(2)
        bar.close()
