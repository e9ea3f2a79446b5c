"""Trains the in-house retrieval model (tools/train/README.md has the recipe).

    python3 tools/train/train.py --run /work/train-runs/r1 --recipe tools/train/recipe.json

A run folder holds checkpoint.pt (resumed automatically: the same command continues
where the last one stopped), log.jsonl (one line per logged step) and the recipe it was
started with. Stages run in order; each ends at its step count or, if it names one, once
its evaluation `metric` (exact, the default: every answer token of an example right; or
token_accuracy) reaches `until_accuracy`. A stage may name a go/no-go: an
accuracy to reach within some minutes of training, else the run stops and says so.
"""
import argparse
import json
import math
import os
import random
import time

import torch

from data import AssociativeRecall, KvDrop, RulerShards, collate
from gguf_weights import load_model
from model import Llama, ModelConfig


def make_source(spec, rng):
    if spec["kind"] == "recall":
        return AssociativeRecall(rng, spec["length"], spec["facts"], spec["queries"], spec.get("key_tokens", 2),
                                 spec.get("max_filler", 6), spec.get("marker", True))
    if spec["kind"] == "ruler":
        # Shard patterns may name ${TRAIN_DATA}: make_shards.sh's folder, /work/train-data by default.
        pattern = spec["shards"].replace("${TRAIN_DATA}", os.environ.get("TRAIN_DATA", "/work/train-data"))
        kv_drop = KvDrop(**spec["kv_drop"]) if "kv_drop" in spec else None
        return RulerShards(rng, pattern, spec.get("prompt_tail", 0), kv_drop, spec.get("worked_example", False))
    raise SystemExit(f"unknown source kind {spec['kind']!r} (known: recall, ruler)")


class Mixture:
    """Draws each example from one of several sources, by weight."""

    def __init__(self, specs, rng):
        self.rng = rng
        self.sources = [make_source(s, rng) for s in specs]
        self.weights = [s.get("weight", 1.0) for s in specs]

    def example(self):
        return self.rng.choices(self.sources, self.weights)[0].example()


def loss_and_accuracy(model, batch, aux_weight):
    """Mean cross-entropy of the answers, plus aux_weight times that of the auxiliary
    (prompt-tail) targets; the accuracy is the answers' alone."""
    tokens, positions, b_index, s_index, targets, aux_b, aux_s, aux_t, eviction = batch
    hidden = model.hidden(tokens, positions, eviction)
    logits = model.logits_at(hidden, b_index, s_index)
    loss = torch.nn.functional.cross_entropy(logits, targets)
    if aux_weight and len(aux_t):
        loss = loss + aux_weight * torch.nn.functional.cross_entropy(model.logits_at(hidden, aux_b, aux_s), aux_t)
    correct = (logits.argmax(-1) == targets).float()
    return loss, correct.mean().item()


@torch.no_grad()
def teacher_forced(model, examples, rng, span):
    """Token accuracy and exact-answer rate (every answer token the argmax) of the
    examples, each run alone with its eviction mask, teacher-forced."""
    was_training = model.training
    model.eval()
    total, exact, tokens_right, tokens_all = 0, 0, 0, 0
    for example in examples:
        tokens, positions, b_index, s_index, targets, *_, eviction = collate([example], rng, span)
        logits = model.logits_at(model.hidden(tokens, positions, eviction), b_index, s_index)
        right = logits.argmax(-1) == targets
        tokens_right += right.sum().item()
        tokens_all += right.numel()
        exact += int(right.all().item())
        total += 1
    model.train(was_training)
    return {"token_accuracy": tokens_right / tokens_all, "exact": exact / total}


def evaluate(model, stage, seed, n_examples, span):
    """The teacher-forced scores on fresh examples of the stage."""
    rng = random.Random(seed)
    source = Mixture(stage["sources"], rng)
    # A generator, so that drawing an example and its positions keep taking turns on rng.
    return teacher_forced(model, (source.example() for _ in range(n_examples)), rng, span)


def learning_rate(recipe, stage, step, stage_step):
    """Linear warm-up to the recipe's lr, then constant; a stage may set its own lr, and
    an `lr_end` that the rate falls to linearly over the stage's steps (a cool-down)."""
    warmup = recipe["warmup_steps"]
    rate = stage.get("lr", recipe["lr"])
    if "lr_end" in stage:
        rate += (stage["lr_end"] - rate) * stage_step / max(1, stage["steps"] - 1)
    return rate * min(1.0, (step + 1) / warmup)


def start_from_gguf(model, cfg, state, path, layer_sources=None):
    """Copies a GGUF model's weights into the run's fresh model; its hyperparameters must be
    the recipe's, except the RoPE base, which the run takes from the file, and the layer
    count when the recipe's `layer_sources` grows the model (grow_layers)."""
    loaded = load_model(path)
    ignored = ("rope_base", "n_ctx") + (("n_layer",) if layer_sources else ())
    mismatched = [f"{key}: recipe {value}, {path} {getattr(loaded.cfg, key)}" for key, value in cfg.to_dict().items()
                  if key not in ignored and not math.isclose(getattr(loaded.cfg, key), value, rel_tol=1e-6)]
    if mismatched:
        raise SystemExit("--init-from: the model is not the recipe's: " + "; ".join(mismatched))
    if layer_sources:
        grow_layers(model, loaded, layer_sources)
    else:
        model.load_state_dict(loaded.state_dict())
    state["rope_base"] = loaded.cfg.rope_base
    print(f"initialised from {path} (RoPE base {loaded.cfg.rope_base:g})")


def grow_layers(model, loaded, layer_sources):
    """Deepens a trained model without changing what it computes: layer i of `model` copies
    layer layer_sources[i] of `loaded`, and a null entry is a new layer whose attention
    output and feed-forward down projections start at zero, so that it adds nothing to
    the residual stream until training gives it a job. The loaded layers keep their order."""
    copied = [i for i in layer_sources if i is not None]
    if len(layer_sources) != model.cfg.n_layer or copied != list(range(loaded.cfg.n_layer)):
        raise SystemExit(f"layer_sources {layer_sources} must name each of the {loaded.cfg.n_layer} loaded layers once, "
                         f"in order, among the recipe's {model.cfg.n_layer}")
    with torch.no_grad():
        model.token_embd.load_state_dict(loaded.token_embd.state_dict())
        model.output_norm.load_state_dict(loaded.output_norm.state_dict())
        for block, source in zip(model.blocks, layer_sources):
            if source is None:
                block.attn_output.weight.zero_()
                block.ffn_down.weight.zero_()
            else:
                block.load_state_dict(loaded.blocks[source].state_dict())


def save_checkpoint(path, model, optimizer, state):
    partial = path + ".partial"
    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "state": state}, partial)
    os.replace(partial, path)


def open_run(run, recipe_arg):
    """A run's folder: its recipe (copied there when the run starts, so that resuming reads
    the one it began with, whatever --recipe says then) and its checkpoint's path."""
    os.makedirs(run, exist_ok=True)
    recipe_path = os.path.join(run, "recipe.json")
    if os.path.exists(recipe_path):
        recipe = json.load(open(recipe_path))
    elif recipe_arg:
        recipe = json.load(open(recipe_arg))
        json.dump(recipe, open(recipe_path, "w"), indent=2)
    else:
        raise SystemExit("a new run needs --recipe")
    return recipe, os.path.join(run, "checkpoint.pt")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run", required=True, help="run folder (checkpoints, log), outside git")
    parser.add_argument("--recipe", help="recipe JSON (required for a new run)")
    parser.add_argument("--minutes", type=float, default=0, help="stop after this much training time (0: no limit)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--init-from", metavar="MODEL.gguf",
                        help="a new run starts from this model's weights and RoPE base (e.g. models/deferkv-retrieval-5m.gguf)")
    args = parser.parse_args()

    torch.set_num_threads(args.threads)
    recipe, checkpoint_path = open_run(args.run, args.recipe)

    torch.manual_seed(recipe["seed"])
    cfg = ModelConfig(**recipe["model"])
    model = Llama(cfg)
    optimizer = torch.optim.AdamW(model.parameters(), lr=recipe["lr"], betas=(0.9, 0.95),
                                  weight_decay=recipe["weight_decay"])
    state = {"stage": 0, "step": 0, "stage_step": 0, "train_seconds": 0.0}
    if args.init_from and not os.path.exists(checkpoint_path):
        start_from_gguf(model, cfg, state, args.init_from, recipe.get("layer_sources"))
    if os.path.exists(checkpoint_path):
        saved = torch.load(checkpoint_path)
        model.load_state_dict(saved["model"])
        optimizer.load_state_dict(saved["optimizer"])
        state = saved["state"]
        print(f"resumed at step {state['step']} (stage {state['stage']}, {state['train_seconds'] / 60:.1f} min trained)")
    # A stage may change the RoPE base (rope_base), for it and the stages after it.
    cfg.rope_base = state.setdefault("rope_base", cfg.rope_base)
    n_params = sum(p.numel() for p in model.parameters())
    print(f"model: {n_params / 1e6:.2f}M parameters, {cfg}")

    log = open(os.path.join(args.run, "log.jsonl"), "a")
    session_start = time.time()
    rng = random.Random(recipe["seed"] * 1000003 + state["step"])
    while state["stage"] < len(recipe["stages"]):
        stage = recipe["stages"][state["stage"]]
        if "rope_base" in stage and stage["rope_base"] != state["rope_base"]:
            # Raising the base ("adjusted base frequency") slows the low-frequency pairs, so
            # that long distances look like the short ones already trained; fine-tuning
            # then adapts the heads that relied on the old rotation.
            cfg.rope_base = state["rope_base"] = stage["rope_base"]
            print(f"stage {stage['name']}: RoPE base {cfg.rope_base:g}")
        source = Mixture(stage["sources"], rng)
        span = stage.get("position_span", 0)
        while state["stage_step"] < stage["steps"]:
            if args.minutes and time.time() - session_start > args.minutes * 60:
                save_checkpoint(checkpoint_path, model, optimizer, state)
                print("time limit reached; checkpoint saved")
                return
            started = time.time()
            for group in optimizer.param_groups:
                group["lr"] = learning_rate(recipe, stage, state["step"], state["stage_step"])
            batch = collate([source.example() for _ in range(stage["batch"])], rng, span)
            loss, accuracy = loss_and_accuracy(model, batch, stage.get("aux_weight", 1.0))
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            state["step"] += 1
            state["stage_step"] += 1
            state["train_seconds"] += time.time() - started
            entry = {"step": state["step"], "stage": stage["name"], "loss": round(loss.item(), 4),
                     "accuracy": round(accuracy, 4), "minutes": round(state["train_seconds"] / 60, 2)}
            done = False
            if state["stage_step"] % recipe["eval_every"] == 0:
                entry["eval"] = evaluate(model, stage, 12345, recipe["eval_examples"], span)
                save_checkpoint(checkpoint_path, model, optimizer, state)
                measured = entry["eval"][stage.get("metric", "exact")]
                done = measured >= stage.get("until_accuracy", 2.0)
                gate = stage.get("go_no_go")
                if gate and state["train_seconds"] / 60 >= gate["minutes"] and measured < gate["accuracy"]:
                    print(json.dumps(entry))
                    raise SystemExit(f"no-go: stage {stage['name']} is at {measured:.2f} ({stage.get('metric', 'exact')}) "
                                     f"after {gate['minutes']} minutes (needs {gate['accuracy']}); change the recipe")
            if state["step"] % recipe["log_every"] == 0 or "eval" in entry:
                print(json.dumps(entry), flush=True)
                log.write(json.dumps(entry) + "\n")
                log.flush()
            if done:
                break
        state["stage"] += 1
        state["stage_step"] = 0
        save_checkpoint(checkpoint_path, model, optimizer, state)
    print("all stages done")


if __name__ == "__main__":
    main()
