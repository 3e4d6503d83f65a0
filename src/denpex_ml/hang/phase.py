"""The phase of training a rank was in: what it was doing when the others started to wait.

The hang classes share one loud symptom (watchdog timeouts on the waiting ranks); the phase
tells them apart. A rank inside ``generate`` under ZeRO-3 points at a divergent forward, one
inside ``Dataset.map`` at long host work, one inside ``_save_checkpoint`` on rank 0 only at a
subset-rank collective. Phases come from stack frames first (innermost match wins) and from
the last activity lines when no frames were printed.

The rules are an ordered list of ``(phase, frame pattern, line pattern)``; the first phase
whose pattern matches, scanning frames from the innermost outwards, is the rank's phase.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from enum import StrEnum
from typing import Any

import re2

from denpex_ml.hang.frames import Frame
from denpex_ml.logs.patterns import ascii_screen_source

__all__ = ["PHASES", "Phase", "phase_of"]


class Phase(StrEnum):
    """Where in a training job a rank was."""

    INIT = "init"  #: rendezvous, process group, model wrapping (DDP/FSDP/DeepSpeed initialise)
    PREPROCESSING = "preprocessing"  #: dataset map / tokenisation / preparing data on the host
    DATA_LOADING = "data-loading"  #: a DataLoader fetching the next batch
    GENERATION = "generation"  #: autoregressive generation (generate, sampling, rollouts)
    EVALUATION = "evaluation"  #: evaluation / validation loop
    CHECKPOINT = "checkpoint-save"  #: writing or consolidating a checkpoint
    LOGGING = "metrics-sync"  #: logging / metric synchronisation across ranks
    PIPELINE = "pipeline-p2p"  #: pipeline-parallel send/recv of activations or gradients
    MOE = "moe-dispatch"  #: MoE token dispatch/combine (all-to-all)
    END = "end-of-training"  #: the training loop ended; shutdown, destroy_process_group
    TRAINING = "training-step"  #: forward/backward/optimizer step
    UNKNOWN = "unknown"


_F = re.IGNORECASE

#: (phase, pattern over "function module_path", pattern over a log line). Order = priority.
_RULES: tuple[tuple[Phase, re.Pattern[str], re.Pattern[str]], ...] = (
    (
        Phase.GENERATION,
        re.compile(
            r"^(generate|_?sample|greedy_search|beam_search|_assisted_decoding|generate_sequences|rollout)\b|"
            r"generation/utils\.py|/rollout/|vllm/.*llm\.py",
            _F,
        ),
        re.compile(
            r"\bgenerat(e|ing|ion)\b.*(token|batch|sequence|sample)|Generating (responses|samples)|"
            r"\brollout\b|[Gg]enerat\w*(?: \w+){0,3}:\s+\d+%",
            _F,
        ),
    ),
    (
        Phase.PREPROCESSING,
        re.compile(
            r"^(map|_map_single|filter|tokeni[sz]e\w*|preprocess\w*|group_texts|load_dataset|"
            r"main_process_first|prepare_data\w*|build_dataset\w*)\b|datasets/arrow_dataset\.py|"
            r"datasets/load\.py",
            _F,
        ),
        re.compile(
            r"Running tokenizer|^Map( \(num_proc=\d+\))?:|Tokeniz|Grouping texts|Preparing (the )?"
            r"(train|test|eval|val)|Generating (train|test|validation) split|Filter( \(num_proc)?|"
            r"[Pp]reprocess|Loading dataset|Packing dataset",
            _F,
        ),
    ),
    (
        Phase.CHECKPOINT,
        re.compile(
            r"^(_?save_checkpoint|_save|save_model|save_pretrained|save_state|_save_optimizer_and_scheduler|"
            r"save_16bit_model|_zero3_consolidated_16bit_state_dict|consolidate\w*|full_state_dict|"
            r"_save_zero_checkpoint|save_fsdp_model|checkpoint)\b|torch/serialization\.py|"
            r"distributed/checkpoint/",
            _F,
        ),
        re.compile(
            r"Saving (model )?(checkpoint|model|DeepSpeed|state)|[Ss]aving checkpoint|save_checkpoint|"
            r"Checkpoint saved|Saving the model",
            _F,
        ),
    ),
    (
        Phase.EVALUATION,
        re.compile(
            r"^(evaluate|evaluation_loop|_evaluate|prediction_step|predict|validation_step|"
            r"_run_evaluate|_evaluation_step|run_eval\w*|eval_\w+|validate)\b",
            _F,
        ),
        re.compile(
            r"Running Evaluation|\*\*\*\*\* Running (Evaluation|Prediction)|Validation( DataLoader|:)|(?:^|\| )[Ee]val\w*(?: \w+){0,3}:\s+\d+%|"
            r"[Ee]valuating|\beval(uation)? (loss|step|batch)|Preparing test set",
            _F,
        ),
    ),
    (
        Phase.LOGGING,
        re.compile(
            r"^(log_dict|_sync_ddp|sync_dist\w*|_sync_dist|all_gather_object|log_metrics|"
            r"reduce_aux_losses\w*|gather_object|_log)\b|torchmetrics/",
            _F,
        ),
        re.compile(r"a^"),
    ),
    (
        Phase.PIPELINE,
        re.compile(
            r"^(send_forward|send_backward|recv_forward|recv_backward|_communicate|_exec_send\w*|"
            r"_exec_recv\w*|send_forward_recv_backward|p2p\w*|batch_isend_irecv)\b|p2p_communication\.py|"
            r"pipe/engine\.py|pipeline_parallel/",
            _F,
        ),
        re.compile(r"a^"),
    ),
    (
        Phase.MOE,
        re.compile(
            r"^(token_dispatch\w*|dispatch|combine|alltoall\w*|_all_to_all\w*|all_to_all\w*)\b|"
            r"moe/|token_dispatcher\.py|deep_ep",
            _F,
        ),
        re.compile(r"dispatch.*(time ?out|timed out)|combine.*(time ?out|timed out)", _F),
    ),
    (
        Phase.DATA_LOADING,
        re.compile(
            r"^(_next_data|__next__|_get_data|_try_get_data|fetch|_get_iterator|__iter__)\b|"
            r"utils/data/dataloader\.py",
            _F,
        ),
        re.compile(r"a^"),
    ),
    (
        Phase.INIT,
        re.compile(
            r"^(init_process_group|_new_process_group_helper|rendezvous|_rendezvous\w*|"
            r"_verify_param_shape_across_processes|_sync_module_states|_sync_params_and_buffers|"
            r"_init_param_handle_from_module|_init_\w+|initialize|prepare|_prepare_\w+|_wrap_model|"
            r"fully_shard|setup_distributed|init_distributed|new_group|_store_based_barrier)\b|"
            r"torch/distributed/rendezvous\.py|distributed/elastic/rendezvous/",
            _F,
        ),
        re.compile(
            r"Rendezvous|Initializing (torch\.)?distributed|init_process_group|Added key: store_based_barrier|"
            r"setting up NCCL communicator|Waiting in store based barrier",
            _F,
        ),
    ),
    (
        Phase.END,
        re.compile(
            r"^(destroy_process_group|on_train_end|_teardown|teardown|shutdown|finalize|on_fit_end|"
            r"_finalize\w*)\b",
            _F,
        ),
        re.compile(
            r"Training completed|Training finished|End of training|training done|on_train_end|"
            r"Finished training|destroy_process_group|train_runtime|\bepoch (?:\d+ )?(?:done|finished|ended)\b|"
            r"leaving the training loop|Early stopping",
            _F,
        ),
    ),
    (
        Phase.TRAINING,
        re.compile(
            r"^(backward|_backward\w*|training_step|train_step|train_batch|optimizer_step|step|"
            r"_inner_training_loop|forward|_call_impl|fit_loop|run_training_batch|reduce_gradients|"
            r"allreduce_gradients|_reduce_and_partition\w*)\b",
            _F,
        ),
        re.compile(
            r"\b(step|iter(ation)?)\s*[:=]?\s*\d+.*\bloss\b|\bloss[:=]\s*[\d.]+|'loss': [\d.]+|"
            r"Epoch \d+:\s+\d+%",
            _F,
        ),
    ),
)


def _line_set() -> Any:
    """An RE2 set of the rules' line patterns (:func:`~denpex_ml.logs.patterns.ascii_screen_source`),
    index = rule; None when one has no RE2 reading."""
    options = re2.Options()
    options.log_errors = False
    rset = re2.Set.SearchSet(options)
    for i, (_, _, line_re) in enumerate(_RULES):
        source = ascii_screen_source(line_re.pattern, line_re.flags)
        try:
            if source is None or rset.Add(source) != i:
                return None
        except re2.error:
            return None
    rset.Compile()
    return rset


_LINE_SET = _line_set()

#: Every phase, in report order.
PHASES: tuple[Phase, ...] = tuple(Phase)


def _frame_key(f: Frame) -> str:
    return f"{f.function} {f.module_path}"


def phase_of(frames: Sequence[Frame], lines: Sequence[str] = ()) -> Phase:
    """The phase of one rank: the most specific phase its frames show, else its last activity.

    Frames are matched against every rule; the rule listed first wins, so a ``forward`` inside
    ``generate`` is generation and a ``_save_checkpoint`` inside the training loop is a
    checkpoint save. Without a recognised frame, the most recent activity line that a rule
    recognises decides.

    Parameters
    ----------
    frames:
        The rank's frames (:func:`~denpex_ml.hang.frames.parse_frames`).
    lines:
        Its last activity lines, oldest first; used when no frame says anything.
    """
    best = len(_RULES)
    for f in frames:
        key = _frame_key(f)
        for i, (_, frame_re, _) in enumerate(_RULES[:best]):
            if frame_re.search(key):
                best = i
                break
    if best < len(_RULES):
        return _RULES[best][0]
    for text in reversed(lines):
        if _LINE_SET is not None and text.isascii() and "\n" not in text:
            # the rules RE2 finds in the line (a superset: see AsciiScreen), then the first of
            # them its own pattern confirms, as trying every rule in order would find
            found: list[int] = _LINE_SET.Match(text.encode("ascii")) or []
            for i in sorted(found):
                phase, _, line_re = _RULES[i]
                if line_re.search(text):
                    return phase
            continue
        for phase, _, line_re in _RULES:
            if line_re.search(text):
                return phase
    return Phase.UNKNOWN
