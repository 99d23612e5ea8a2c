"""The logic of models.constrained's decoding loop, on a fake model and grammar: forced tokens are read with the sampled
one in one forward pass, the grammar's end needs no pass for an end-of-text token, and max_tokens counts every token.
The real engine's loop is tested in tests/integration/test_constrained.py."""
from __future__ import annotations

from models.constrained import DecodeCounts, Grammar, constrained_tokens


class _Matcher:
    """A grammar of one fixed answer: every token forced after the first (a fake matcher, for the loop's logic)."""

    def __init__(self, answer: list[int]) -> None:
        self.answer, self.at = answer, 0

    def validate_tokens(self, tokens):
        valid = 0
        while valid < len(tokens) and self.at + valid < len(self.answer) and \
                tokens[valid] == self.answer[self.at + valid]:
            valid += 1
        return valid

    def consume_token(self, token):
        ok = self.at < len(self.answer) and token == self.answer[self.at]
        self.at += ok
        return ok

    def is_stopped(self):
        return self.at >= len(self.answer)

    def compute_ff_tokens(self):
        return self.answer[self.at:]

    def try_consume_tokens(self, tokens):
        self.at += len(tokens)
        return len(tokens)


class _FixedGrammar(Grammar):
    def __init__(self, answer: list[int]) -> None:
        self.matcher = _Matcher(answer)

    def mask(self, width: int):
        import mlx.core as mx
        return mx.arange(width) == self.matcher.answer[self.matcher.at]


class _Model:
    """Counts its forward passes and the tokens each read; prefers token 0, which the grammar never allows."""

    def __init__(self) -> None:
        self.reads: list[int] = []
        self.args = type("Args", (), {"vocab_size": 16})()  # what models.generation.check_ids_fit reads

    def __call__(self, tokens, cache):
        import mlx.core as mx
        self.reads.append(tokens.shape[1])
        logits = mx.zeros((1, tokens.shape[1], 16))
        return logits + mx.array([5.0] + [0.0] * 15)


def test_a_forced_answer_costs_one_pass_after_the_prompt_and_stops_without_asking_for_eos():
    import mlx.core as mx

    from models.generation import new_stream
    model, counts = _Model(), DecodeCounts()
    grammar = _FixedGrammar([3, 7, 9, 4])
    out = list(constrained_tokens(model, mx.array([1, 2, 5]), grammar, cache=[], stream=new_stream(),
                                  max_tokens=10, eos={15}, counts=counts))
    assert out == [3, 7, 9, 4]
    assert model.reads == [2, 1]  # the prompt's first two tokens, then its last: one pass chose 3, the rest forced
    assert (counts.sampled, counts.forced, counts.passes, counts.masks) == (1, 3, 1, 1)


def test_max_tokens_counts_forced_tokens_too():
    import mlx.core as mx

    from models.generation import new_stream
    grammar = _FixedGrammar([3, 7, 9, 4])
    out = list(constrained_tokens(_Model(), mx.array([1]), grammar, cache=[], stream=new_stream(), max_tokens=2,
                                  eos={15}))
    assert out == [3, 7]


class _Counting:
    """A model whose greedy choice after token t is t + 1 (mod 16), at every position it reads."""

    def __init__(self) -> None:
        self.reads: list[int] = []
        self.args = type("Args", (), {"vocab_size": 16})()

    def __call__(self, tokens, cache):
        import mlx.core as mx
        self.reads.append(tokens.shape[1])
        return mx.eye(16)[(tokens + 1) % 16] * 5.0


class _Anything(_FixedGrammar):
    """A grammar that allows any token and ends after `length` of them."""

    def __init__(self, length: int) -> None:
        self.matcher = _Matcher([0] * length)
        self.length = length

    def valid_prefix(self, tokens):
        return min(len(tokens), self.length - self.matcher.at)

    def allows(self, token):
        return True

    def consume(self, token):
        self.matcher.at += 1
        return True

    def forced(self):
        return []


def test_a_draft_from_the_prompt_is_kept_as_far_as_the_model_agrees_and_the_output_is_the_greedy_one():
    import mlx.core as mx

    from models.generation import new_stream
    model, counts = _Counting(), DecodeCounts()
    prompt = [1, 2, 3, 4, 5, 6, 7, 8, 1, 2]  # "1 2" was followed by 3 4 5 6 7 8 1 2: the draft after the last "1 2"
    out = list(constrained_tokens(model, mx.array(prompt), _Anything(10), cache=[], stream=new_stream(),
                                  max_tokens=10, eos={15}, counts=counts, history=prompt))
    assert out == [3, 4, 5, 6, 7, 8, 9, 10, 11, 12]  # what one token a pass gives: t + 1 each time
    assert counts.drafted >= 6 and counts.passes < 10 and counts.passes + counts.drafted == 10
