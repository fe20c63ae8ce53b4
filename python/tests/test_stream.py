"""Streaming, cancellation (leaving a stream, Ctrl-C) and the GIL: released while the engine works."""

import _thread
import threading
import time

import pytest
from aerie import LLM, SamplingParams
from aerie.errors import NotFoundError
from conftest import MODEL, PROMPTS

LONG = SamplingParams(temperature=0, max_tokens=400, ignore_eos=True)


def occupy(llm, n):
    """Queues n requests of 500 tokens on an engine of one sequence slot (about 0.5 s each here): a request
    submitted after them waits that long for its first event. Submitted through the extension itself, so
    that nothing reads them; closing the engine cancels them."""
    ids = llm.get_tokenizer().encode(PROMPTS[0])
    return [llm._engine.submit(ids, 500, 0.0, 0, 1.0, 0.0, 0, [], [], True, -1) for _ in range(n)]


def test_stream_concatenates_to_the_whole_output(llm, spec_llm):
    for engine in (llm, spec_llm):
        params = SamplingParams(temperature=0, max_tokens=24, logprobs=2)
        whole = engine.generate(PROMPTS[2], params)[0].outputs[0]
        deltas = list(engine.generate_stream(PROMPTS[2], params))
        assert len(deltas) > 1
        assert [d.finished for d in deltas] == [False] * (len(deltas) - 1) + [True]
        assert "".join(d.outputs[0].text for d in deltas) == whole.text
        assert sum((d.outputs[0].token_ids for d in deltas), []) == whole.token_ids
        assert sum((d.outputs[0].logprobs for d in deltas), []) == whole.logprobs
        assert deltas[-1].outputs[0].finish_reason == whole.finish_reason
        assert deltas[-1].metrics.generated_tokens == len(whole.token_ids)
        assert all(d.request_id == deltas[0].request_id for d in deltas)
    stopped = list(llm.generate_stream(PROMPTS[2], SamplingParams(temperature=0, max_tokens=24, stop=" the")))
    assert stopped[-1].outputs[0].stop_reason == " the"


def test_leaving_a_stream_cancels_its_request():
    with LLM(model=MODEL, max_num_seqs=1, n_threads=2) as one:
        stream = one.generate_stream(PROMPTS[0], LONG)
        first = next(stream)
        assert not first.finished
        stream.close()  # what a `break` out of the loop does once the generator is collected
        # The request was released (so cancelled: libaerie's contract), and the single sequence slot is
        # free: the next request runs at once instead of after 400 tokens.
        with pytest.raises(NotFoundError, match="not in this engine"):
            one._engine.next_event(1, 0)
        started = time.monotonic()
        assert len(one.generate(PROMPTS[1], SamplingParams(temperature=0, max_tokens=2))[0].outputs[0].token_ids) == 2
        assert time.monotonic() - started < 5


def test_ctrl_c_while_waiting_cancels_and_raises():
    with LLM(model=MODEL, max_num_seqs=1, n_threads=2) as one:
        blockers = occupy(one, 3)
        timer = threading.Timer(0.2, _thread.interrupt_main)
        started = time.monotonic()
        timer.start()
        with pytest.raises(KeyboardInterrupt):
            one.generate(PROMPTS[1], SamplingParams(temperature=0, max_tokens=8))
        assert time.monotonic() - started < 1.0  # at once, not after the queue ahead of it (~1.5 s)
        timer.join()
        with pytest.raises(NotFoundError):  # generate released its request on the way out
            one._engine.next_event(blockers[-1] + 1, 0)
        for id in blockers:
            one._engine.release(id)
        out = one.generate(PROMPTS[1], SamplingParams(temperature=0, max_tokens=8))[0]
        assert len(out.outputs[0].token_ids) == 8


def test_the_gil_is_released_while_generate_waits():
    """A thread blocked in generate() (its request queued behind a long one) lets this thread run."""
    with LLM(model=MODEL, max_num_seqs=1, n_threads=2) as one:
        blockers = occupy(one, 3)
        entered, done = threading.Event(), threading.Event()

        def waiter():
            entered.set()
            one.generate(PROMPTS[1], SamplingParams(temperature=0, max_tokens=2))
            done.set()

        thread = threading.Thread(target=waiter)
        thread.start()
        entered.wait()
        time.sleep(0.05)  # the waiter is inside the engine call now
        progress = sum(sum(range(1000)) > 0 for _ in range(2000))  # pure Python: needs the GIL
        assert progress == 2000 and not done.is_set()  # ran while the waiter still waited
        for id in blockers:  # releasing cancels them: the waiter's request runs
            one._engine.release(id)
        thread.join(timeout=30)
        assert done.is_set()
