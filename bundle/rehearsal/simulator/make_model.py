"""Build the simulated model folder: a word-level tokenizer and a config.json, made offline.

    python -m bundle.rehearsal.simulator.make_model [DIR]     (default: bundle/rehearsal/simulator/simulated_model)

The output is committed, so nothing here runs at image build or at run time; this script records
how it was made and rebuilds it byte for byte. A word-level tokenizer is used on purpose: decoding
token ids and encoding the text again gives the same ids, so the token counts the simulator reports
(`completion_tokens`) equal what bench_serving counts when it re-tokenizes the generated text.
"""

from __future__ import annotations

import itertools
import json
import random
import sys
from pathlib import Path

from tokenizers import Tokenizer, decoders, models, pre_tokenizers

DEFAULT_DIR = Path(__file__).resolve().parent / "simulated_model"
VOCAB_SIZE = 8192
SPECIAL_TOKENS = ["<unk>", "<s>", "</s>", "<|system|>", "<|user|>", "<|assistant|>"]
PUNCTUATION = list(".,?!:;'\"-()[]{}/*+=%$#&@<>|_~`^\\")
DIGITS = [str(d) for d in range(10)]
# Words the simulator answers with and words common in prompts, so smoke prompts tokenize mostly
# to real words rather than <unk>.
ENGLISH = """
the a an of to in on at by for with from and or but not no yes is are was were be been being
it its this that these those there here what which who whom whose when where why how
I you he she we they me him her us them my your his our their
capital city country France Paris Lyon Marseille Germany Berlin Italy Rome Spain Madrid
Japan Tokyo England London United Kingdom States America Washington Europe world
answer question please tell say said write explain give name list one two three four five
six seven eight nine ten hundred thousand number word words sentence short long only just
The A An It This That What Which Who When Where Why How Please Tell Answer Yes No
hello Hello hi Hi thanks Thanks thank you world World model assistant user system
simulated simulator worker rehearsal token tokens text output input prompt reply response
do does did done make made can could will would should shall may might must have has had
about after before again all also always any because between both each few first last
more most much many new now old other over same so some such than then time up very well
""".split()
SYLLABLE_ONSETS = "b c d f g h j k l m n p r s t v w z br cr dr fr gr pr tr st sp sk".split()
SYLLABLE_VOWELS = "a e i o u ai ea io ou".split()


def _synthetic_words(count: int, taken: set[str]) -> list[str]:
    """Pronounceable filler words (two syllables), in a fixed order."""
    syllables = [o + v for o, v in itertools.product(SYLLABLE_ONSETS, SYLLABLE_VOWELS)]
    words = []
    for first, second in itertools.product(syllables, syllables):
        word = first + second
        if word not in taken:
            words.append(word)
            taken.add(word)
            if len(words) == count:
                return words
    raise ValueError(f"only {len(words)} synthetic words available, {count} asked")


def vocabulary() -> list[str]:
    vocab: list[str] = []
    for token in SPECIAL_TOKENS + PUNCTUATION + DIGITS + ENGLISH:
        if token not in vocab:
            vocab.append(token)
    vocab += _synthetic_words(VOCAB_SIZE - len(vocab), set(vocab))
    return vocab


def build_tokenizer() -> Tokenizer:
    vocab = vocabulary()
    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(vocab)}, unk_token="<unk>"))
    # Whitespace splits on \w+|[^\w\s]+ ; the WordPiece decoder without a prefix joins with spaces.
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.decoder = decoders.WordPiece(prefix="##", cleanup=False)
    tok.add_special_tokens(SPECIAL_TOKENS)
    return tok


# A chat template in the usual Jinja form, so clients that render it (bench_serving's chat
# backends, transformers' apply_chat_template) see the same prompt the simulator counts.
CHAT_TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|> {{ m['content'] }} </s> {% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)


def tokenizer_config() -> dict:
    return {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "model_max_length": 163840,
        "bos_token": "<s>",
        "eos_token": "</s>",
        "unk_token": "<unk>",
        "pad_token": "</s>",
        "add_bos_token": False,
        "add_eos_token": False,
        "clean_up_tokenization_spaces": False,
        "chat_template": CHAT_TEMPLATE,
    }


def model_config() -> dict:
    """A config.json shaped like DeepSeek-V4-Flash-0731's where the driver and SGLang read it: the
    V4-Flash architecture with a DSpark draft bundled (the checkpoint a user today likely runs), so a
    rehearsal can run levers.speculative: dspark. dspark_block_size is SGLang's default gamma (7), not
    a value read from the real checkpoint."""
    return {
        "_comment": "SIMULATED model for rehearsal (bundle/rehearsal/simulator): no weights, word-level tokenizer",
        "architectures": ["DeepseekV4ForCausalLM"],
        "model_type": "deepseek_v4",
        "simulated": True,
        "num_hidden_layers": 43,
        "vocab_size": VOCAB_SIZE,
        "max_position_embeddings": 163840,
        "bos_token_id": 1,
        "eos_token_id": 2,
        "torch_dtype": "bfloat16",
        "dspark_block_size": 7,
    }


# bench_serving's random dataset makes at most one prompt per conversation of the file: enough for
# C=256 x 4 prompts, the largest level a rehearsal is expected to run.
SHAREGPT_CONVERSATIONS = 1024


def sharegpt_prompts(vocab: list[str], count: int = SHAREGPT_CONVERSATIONS) -> list[dict]:
    """A ShareGPT-format file for `bench_serving --dataset-name random --dataset-path`: without a
    local file that dataset downloads ShareGPT from the Hugging Face hub, which the rehearsal
    cannot reach. Contents are filler words from the vocabulary, seeded, so the file is stable."""
    rng = random.Random(20250601)
    words = [w for w in vocab if w not in SPECIAL_TOKENS]
    rows = []
    for i in range(count):
        # bench_serving repeats or cuts the prompt to the input length asked for, so short turns do.
        human = " ".join(rng.choice(words) for _ in range(rng.randint(24, 96)))
        gpt = " ".join(rng.choice(words) for _ in range(rng.randint(8, 24)))
        rows.append({"id": f"simulated-{i}", "conversations": [
            {"from": "human", "value": human}, {"from": "gpt", "value": gpt}]})
    return rows


def write_model(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    tok = build_tokenizer()
    tok.save(str(out / "tokenizer.json"), pretty=False)
    dump = lambda obj: json.dumps(obj, indent=1, sort_keys=True) + "\n"  # noqa: E731
    (out / "tokenizer_config.json").write_text(dump(tokenizer_config()))
    (out / "config.json").write_text(dump(model_config()))
    (out / "generation_config.json").write_text(dump({"bos_token_id": 1, "eos_token_id": 2}))
    (out / "bench-sharegpt.json").write_text(json.dumps(sharegpt_prompts(vocabulary())) + "\n")
    (out / "README.md").write_text(
        "# SIMULATED model folder (rehearsal only)\n\n"
        "Mounted as /model by the rehearsal (compose/rehearsal-*.yaml) in place of DeepSeek-V4-Flash.\n"
        "No weights: the worker simulator (bundle/rehearsal/simulator) answers from rules, and counts tokens\n"
        "with this word-level tokenizer. `bench-sharegpt.json` is a local ShareGPT-format file for\n"
        "`bench_serving --dataset-name random --dataset-path /model/bench-sharegpt.json` offline.\n"
        "Rebuild with `python -m bundle.rehearsal.simulator.make_model`.\n")


if __name__ == "__main__":
    write_model(Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_DIR)
