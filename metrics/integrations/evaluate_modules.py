"""What every moverkit evaluate module shares: input features, input checking, thread safety."""

from __future__ import annotations

import abc
import contextlib
import inspect
import os
import re
import threading

import datasets
import evaluate

from moverkit._core.base import check_inputs

ARGUMENT_DOCS = {
    "model_type": (
        "model_type (str, optional): a Hugging Face model id or local path. Default: the embedded\n"
        "        sentence-transformers/all-MiniLM-L6-v2 (installed with moverkit, no download)."
    ),
    "batch_size": (
        "batch_size (int, default 64): texts per forward pass; on a CPU a pass also holds at most\n"
        "        4,096 padded tokens (texts sorted by length fill it)."
    ),
    "device": 'device (str, optional): "cpu", "cuda", "cuda:1", ... Default: CUDA when available, else CPU.',
    "verbose": "verbose (bool, default False): show a progress bar while encoding.",
    "max_length": (
        "max_length (int, optional): truncate texts to this many tokens (default and maximum: the\n"
        "        model's limit). Longer texts are truncated with one warning."
    ),
    "lang": (
        'lang (str, default "en"): the language of the texts, as in evaluate\'s bertscore: a language\n'
        '        code, ISO 639-1 or 639-3 ("en", "de", "zh", "yue"), any case, optionally with subtags as\n'
        '        bert-score\'s "en-sci" or "pt-br"; a name that is no code ("klingon", "english") is a\n'
        "        ValueError naming lang. It changes no score for a given model (it is not in the hashcode);\n"
        "        with the English embedded model (model_type None) any other language warns: pass a\n"
        "        multilingual model_type. With another language, rescale_with_baseline needs baseline_path\n"
        "        (the shipped baseline is English)."
    ),
    "long_texts": (
        'long_texts (str, default "truncate"): texts longer than the token limit are cut at it\n'
        '        ("truncate", as bert-score) or encoded whole in overlapping windows ("window": each token\n'
        "        keeps its vector from the window where it is most central). Texts within the limit score\n"
        '        the same either way. See "Long texts" in the card.'
    ),
    "dtype": (
        'dtype (str, default "float32"): the precision of the encoder\'s forward pass: "float32" (exact,\n'
        '        bert-score parity), "bfloat16" (about 2x faster on a CPU with AMX or AVX512-BF16 units, scores\n'
        '        within about 1e-3; 4x slower on other CPUs, where it warns; see "Speed" in the card),\n'
        '        "float16" (GPU only; refused on a CPU) or "auto" (bfloat16 on a CPU with bfloat16 units and\n'
        "        on a GPU, float16 on a GPU without bfloat16, float32 otherwise). Similarities and transport\n"
        "        stay in float32/float64. The precision that ran is in the hashcode."
    ),
    "references": (
        "references (list of str, or list of list of str): one reference per prediction, or a list of\n"
        "        references per prediction; each prediction is then scored against each of its references\n"
        "        and the best score is kept (the highest; the lowest for a distance)."
    ),
    "num_layers": (
        "num_layers (int, optional): the layer whose token vectors are used (k = output of the k-th\n"
        "        block, negative counts from the top). Default: a tuned layer for known models, else the last."
    ),
    "centering_stats": (
        'centering_stats (CenteringStats or path, optional): the corpus statistic for centering="corpus",\n'
        "        from moverkit.fit_centering(texts, model_type=..., num_layers=...) (or the file it was saved\n"
        "        to); default: the one shipped for the embedded model (fitted on WMT17 news references)."
    ),
    "rescale_with_baseline": (
        "rescale_with_baseline (bool, default False): rescale each score against b, the mean score of\n"
        "        random unrelated sentence pairs under the same model, layer and settings (bert-score's method):\n"
        "        (s - b) / (1 - b) for a similarity, d / b for a distance (lazy_emd), so that unrelated texts\n"
        "        score about 0 (1 for a distance) and the order of scores does not change. The embedded\n"
        "        model's baseline at the default settings ships; other settings, another model, a statistic of\n"
        "        your own or lang other than English need baseline_path. See rescale_with_baseline in the card."
    ),
    "baseline_path": (
        "baseline_path (str, optional): a baseline file from `moverkit fit-baseline --metric <this metric>`\n"
        "        (a file fitted under other settings than the call's is refused); used with rescale_with_baseline."
    ),
    "return_reference_index": (
        'return_reference_index (bool, default False): also return "reference_index", per prediction the\n'
        "        position (from 0) of the reference among its references that gave the kept score."
    ),
    "return_reference_index_by_f1": (
        'return_reference_index (bool, default False): also return "reference_index", per prediction the\n'
        "        position (from 0) of the reference among its references that gave the kept score (by F1)."
    ),
    "precision_recall_f1": (
        "precision (list of float): per prediction, in [-1, 1]; higher is better.\n"
        "    recall (list of float): per prediction, in [-1, 1]; higher is better.\n"
        "    f1 (list of float): per prediction, in [min(precision, recall), max(precision, recall)]; higher is better."
    ),
    "reference_index": (
        "reference_index (list of int, only with return_reference_index): per prediction, the position of\n"
        "        the reference whose score was kept (0 with a single reference)."
    ),
    "centering": (
        'centering (str, default "corpus"): "none", "dim" (each vector\'s own mean over dimensions),\n'
        '        "sentence" (the mean of the text\'s tokens), "batch" (the mean of all tokens of all texts of\n'
        '        this compute call: the paper\'s method) or "corpus" (a mean fitted once on a corpus, so a\n'
        "        pair scores the same in any call: the statistic shipped for the embedded model, or\n"
        "        centering_stats; any other model needs centering_stats or another mode)."
    ),
    "settings": (
        "settings (str, optional): the path of a settings file written by `moverkit tune` for this metric:\n"
        "        its arguments apply as if passed (an argument also given must agree with it), and the\n"
        '        hashcode ends with "|settings:" and the file\'s digest. See "Tuned settings" in the card.'
    ),
}
"""The documentation of the encoder arguments that several modules share, word for word: each
module's ``_KWARGS_DESCRIPTION`` takes them through :func:`inputs_description` (``{dtype}``, or
``{batch_size, device, verbose}`` for several in a row, on a line of its own, indented as an
argument), so the modules cannot drift apart."""

IDENTICAL_PAIRS_EXAMPLE = (
    '>>> metric = evaluate.load("metrics/{name}")\n'
    '    >>> results = metric.compute(predictions=["hello there", "general kenobi"],\n'
    '    ...                          references=["hello there", "general kenobi"])\n'
    '    >>> print([round(v, 2) for v in results["{key}"]])\n'
    "    [{score}, {score}]"
)
"""The examples' opening that the token-level modules share: the module loaded, two pairs of
identical texts scored (``{identical_pairs}`` in a module's ``_KWARGS_DESCRIPTION``)."""


def inputs_description(text: str, name: str, key: str | None = None, score: str = "1.0") -> str:
    """A module's ``_KWARGS_DESCRIPTION``: ``text`` with each line ``{argument, ...}`` replaced by
    those arguments' :data:`ARGUMENT_DOCS` one after the other at that line's indentation, and
    ``{identical_pairs}`` by :data:`IDENTICAL_PAIRS_EXAMPLE` for module ``name`` (its scores under
    ``key``, default ``name``, each ``score``)."""
    example = IDENTICAL_PAIRS_EXAMPLE.format(name=name, key=key or name, score=score)
    docs = {**ARGUMENT_DOCS, "identical_pairs": example}

    def fill(line: re.Match) -> str:
        return "\n".join(line[1] + docs[argument] for argument in line[2].split(", "))

    return re.sub(r"^( +)\{([\w, ]+)\}$", fill, text, flags=re.M)


def evaluate_module(class_name: str, function, module: str, texts: tuple[str, str, str], links: dict):
    """The ``evaluate.Metric`` class of a bundled module (``<name>/<name>.py``, named ``module``):
    ``texts`` (its description, inputs description and citation) and ``links`` (``homepage``,
    ``codebase_urls``, ``reference_urls``) in ``_info``, and ``function`` as ``_compute``
    (:func:`compute_with`). evaluate takes the first concrete Metric class of the module file, and
    names the metric after ``class_name`` (``LazyEmd`` -> ``lazy_emd``)."""
    description, inputs_description, citation = texts

    def _info(self):
        return evaluate.MetricInfo(
            description=description,
            citation=citation,
            inputs_description=inputs_description,
            features=text_pair_features(),
            **links,
        )

    body = {"_info": _info, "_compute": compute_with(function), "__module__": module}
    return evaluate.utils.file_utils.add_start_docstrings(description, inputs_description)(
        type(class_name, (TextPairMetric,), body)
    )


def compute_with(function):
    """A module's ``_compute``: ``function`` (``moverkit.functional.<name>``) called with the inputs
    and the arguments its caller gave, and no others, under the function's own signature (what
    ``inspect`` shows and evaluate's docs list). evaluate passes ``_compute`` only the keyword
    arguments given to ``compute``, so an argument left at its default stays left out, and a
    settings file can tell it from one given at its default value (``settings=``): restating the
    signature with defaults would pass every argument as given."""

    def _compute(self, predictions, references, **kwargs):
        return function(predictions, references, **kwargs)

    signature = inspect.signature(function)
    itself = inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)
    _compute.__signature__ = signature.replace(parameters=[itself, *signature.parameters.values()])
    _compute.__doc__ = function.__doc__
    return _compute


BATCH_CENTERING_CITATION = """\
@inproceedings{chen-etal-2020-improving,
    title = "Improving Text Generation Evaluation with Batch Centering and Tempered Word Mover Distance",
    author = "Chen, Xi and Ding, Nan and Levinboim, Tomer and Soricut, Radu",
    booktitle = "Proceedings of the First Workshop on Evaluation and Comparison of NLP Systems",
    year = "2020",
    publisher = "Association for Computational Linguistics",
    url = "https://aclanthology.org/2020.eval4nlp-1.6",
    pages = "51--57",
}
"""
"""The tempered-WMD and batch-centering paper (Chen et al., 2020), which three modules cite."""


def text_pair_features() -> list[datasets.Features]:
    """The two input layouts: one reference string per prediction, or a list of them."""
    return [
        datasets.Features(
            {
                "predictions": datasets.Value("string", id="sequence"),
                "references": datasets.Sequence(datasets.Value("string", id="sequence"), id="references"),
            }
        ),
        datasets.Features(
            {
                "predictions": datasets.Value("string", id="sequence"),
                "references": datasets.Value("string", id="sequence"),
            }
        ),
    ]


class TextPairMetric(evaluate.Metric, metaclass=abc.ABCMeta):
    """An ``evaluate.Metric`` that checks its inputs before evaluate stores them.

    evaluate's own feature encoding turns ``None`` into an unnamed ``TypeError`` and silently casts
    numbers to strings; checking first gives errors that name the argument and the item.
    It is abstract so that ``evaluate.load``, which takes the first concrete Metric class in a
    module's namespace, picks the module's own class and not this imported base.

    Threads. evaluate keeps what one object is given in one cache file and one writer, which two
    threads at once corrupt (``ArrowInvalid``, ``FileNotFoundError``, then ``None`` results). So
    ``compute``, ``add_batch`` and ``add`` of one object run one at a time (a lock): threads that
    call ``compute(predictions=..., references=...)`` on a shared object wait for each other and
    each gets its own result. Batches added with ``add_batch``/``add`` belong to the thread that
    added them until its ``compute()``; meanwhile another thread's call on the object is a
    ``RuntimeError`` (its pairs would silently join them). To stream in several threads at once,
    load one object per thread (``moverkit.load``; the encoder is loaded once per process).
    """

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._lock = threading.RLock()
        self._batches_owner: int | None = None  # the thread whose added batches await compute()

    @abc.abstractmethod
    def _info(self): ...

    @abc.abstractmethod
    def _compute(self, predictions, references): ...

    def compute(self, *, predictions=None, references=None, **kwargs):
        """evaluate's ``compute``, one call at a time per object (see the class docstring).

        No pairs at all (``predictions=[]``, or only empty batches added) give empty per-example
        lists and the hashcode, as the metric's function does; evaluate itself would fail on them.
        """
        with self._exclusive():
            # evaluate keeps the last call's paths after it succeeds; clear them, so that a failed
            # call removes only what it locked itself (the same file name may by now be another
            # object's live cache file).
            self.file_paths = self.filelocks = None
            try:
                if predictions is not None or references is not None:
                    self.add_batch(predictions=predictions, references=references)
                if self.writer is None and self._batches_owner is not None and self.num_process == 1:
                    return self._compute(predictions=[], references=[], **kwargs)
                return super().compute(**kwargs)
            except BaseException:
                self._drop_failed_call()
                raise
            finally:
                self._batches_owner = None  # compute used (or, failing, dropped) the added batches

    def _drop_failed_call(self) -> None:
        """Remove the cache files of a call whose ``_compute`` failed and release their locks, as
        evaluate's ``compute`` does only after a ``_compute`` that returns. Without it each failed
        call (a bad argument caught in a training loop) left an Arrow file in evaluate's cache,
        its lock held, and the object's next call waited one second on that lock before it took
        a new file."""
        locks, paths = self.filelocks or [], self.file_paths or []
        self.data = None
        for lock, path in reversed(list(zip(locks, paths))):
            with contextlib.suppress(FileNotFoundError):
                os.remove(path)
            lock.release()
        self.filelocks = self.file_paths = None

    def add_batch(self, *, predictions=None, references=None, **kwargs):
        """Add a batch of predictions and references (checked first) for a later ``compute``.

        References are stored in one layout, a list of strings per prediction (a lone string is a
        list of one), so batches of either layout go together (evaluate fixes the layout of its
        first batch and refuses the other); an empty batch adds nothing."""
        predictions, grouped = check_inputs(predictions, references)
        with self._exclusive():
            if predictions:
                super().add_batch(predictions=predictions, references=grouped, **kwargs)
            self._batches_owner = threading.get_ident()

    def add(self, *, prediction=None, reference=None, **kwargs):
        """Add one prediction and its reference(s) (checked first; stored as in :meth:`add_batch`)
        for a later ``compute``."""
        _, (grouped,) = check_inputs([prediction], [reference])
        with self._exclusive():
            super().add(prediction=prediction, reference=grouped, **kwargs)
            self._batches_owner = threading.get_ident()

    @contextlib.contextmanager
    def _exclusive(self):
        """Hold this object's lock; refuse a thread other than the one whose batches are pending."""
        with self._lock:
            if self._batches_owner not in (None, threading.get_ident()):
                raise RuntimeError(
                    f"{self.name}: another thread has added batches to this object (add_batch/add) and not "
                    "yet called compute(); one object accumulates for one thread at a time: load one "
                    "object per thread (moverkit.load) to score in several threads at once"
                )
            yield
