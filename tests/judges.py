"""Shared pieces of the LLM judge tests: a tiny real transformers chat model, a benchmark of four candidate
answers (the ``judged_items`` fixture, registered in ``tests/conftest.py``) and fast retries."""
import pytest

from tests.factories import BenchmarkFactory, CandidateAnswerFactory, LALMFactory, QuestionFactory

FAST_RETRIES = {"PREPARATION_MAX_ATTEMPTS": 3, "PREPARATION_BACKOFF_BASE_S": 0.01, "PREPARATION_BACKOFF_MAX_S": 0.05}


@pytest.fixture
def judged_items():
    """A benchmark of two questions with two candidate answers each (four items)."""
    bench = BenchmarkFactory(name="judged")
    lalms = [LALMFactory(name="M1"), LALMFactory(name="M2")]
    candidates = []
    for index in range(2):
        question = QuestionFactory(benchmark=bench, external_id=f"q{index}")
        for lalm in lalms:
            candidates.append(CandidateAnswerFactory(question_version=question.current_version, lalm=lalm,
                                                     text=f"answer {index} {lalm.name}"))
    return bench, candidates


def tiny_local_chat_model(folder) -> None:
    """A randomly initialised 1-layer Llama with a character-level tokenizer and a chat template, saved to
    ``folder`` (a real transformers checkpoint, tiny enough for CPU tests)."""
    from tokenizers import Tokenizer, models
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    chars = [chr(c) for c in range(32, 127)] + ["\n", "–"]
    vocab = {"<unk>": 0, "<eos>": 1, **{c: i + 2 for i, c in enumerate(chars)}}
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token="<unk>")),
        unk_token="<unk>", eos_token="<eos>", pad_token="<eos>",
        chat_template=(
            "{% for m in messages %}{{ m['content'] }}\n{% endfor %}{% if add_generation_prompt %}Judge:{% endif %}"
        ),
    )
    tokenizer.save_pretrained(folder)
    config = LlamaConfig(vocab_size=len(vocab), hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                         num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=4096,
                         eos_token_id=1, pad_token_id=1, bos_token_id=1)
    LlamaForCausalLM(config).save_pretrained(folder)
