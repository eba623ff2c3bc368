"""Contender factories shared by the speed suites (see :class:`moverkit.bench.SpeedSuite`)."""

from __future__ import annotations


def distinct(predictions, references) -> list[str]:
    """The distinct texts of a call (predictions, then references), in the order of first use."""
    return list(dict.fromkeys([*predictions, *references]))


def encoder_floor(predictions, references, model_type=None, num_layers=None):
    """The encoder alone on the distinct texts: the floor no embedding metric can beat."""
    from moverkit._core.encoding import EncoderRequest, encode, encoder_for

    request = EncoderRequest(model_type, num_layers)
    encoder = encoder_for(request)
    texts = distinct(predictions, references)
    encode(encoder, texts[:2], request)
    return lambda: encode(encoder, texts, request)


def metric_run(name: str, **kwargs):
    """A factory timing ``moverkit.load(name).compute(..., **kwargs)`` (module loaded, encoder warm)."""

    def factory(predictions, references):
        import moverkit

        metric = moverkit.load(name)
        metric.compute(predictions=predictions[:16], references=references[:16], **kwargs)  # 16: no few-texts warning
        return lambda: metric.compute(predictions=predictions, references=references, **kwargs)

    return factory
