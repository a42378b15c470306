"""``sculler`` command line: ``sculler train --config FILE`` and ``sculler check-grad``."""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from sculler.core.model_config import ModelConfig


def load_source(spec: str) -> Callable:
    """``"module:function"`` -> ``function()``, a reader."""
    module_name, _, fn = spec.partition(":")
    if not fn:
        raise ValueError(f"data source {spec!r} must look like 'module:function'")
    return getattr(importlib.import_module(module_name), fn)()


def set_data_kinds(model: ModelConfig, sample: tuple, input_types: dict) -> None:
    """Give each data layer the storage kind of its field: ``input_types[name]`` if given,
    else from the first sample (a Python/NumPy integer -> ids, anything else -> dense)."""
    names = model.input_layer_names
    if len(sample) != len(names):
        raise ValueError(
            f"the train reader yields samples of {len(sample)} fields but the config has "
            f"{len(names)} data layers {names}"
        )
    for name, field in zip(names, sample):
        layer = model.layer(name)
        declared = input_types.get(name)
        if declared is not None:
            layer.attrs["kind"], layer.attrs["seq_type"] = declared.kind, declared.seq_type
        elif isinstance(field, (int, np.integer)):
            layer.attrs["kind"] = "ids"


def make_optimizer(settings: dict) -> Any:
    """The sculler.optimizer object the v1 ``settings(...)`` describe."""
    from sculler import optimizer

    method = settings["learning_method"]
    keywords = {k: settings[k] for k in (
        "learning_rate_decay_a", "learning_rate_decay_b", "learning_rate_schedule",
        "learning_rate_args") if k in settings}
    return getattr(optimizer, method.optimizer)(
        learning_rate=settings["learning_rate"],
        regularization=settings.get("regularization"),
        gradient_clipping_threshold=settings.get("gradient_clipping_threshold"),
        model_average=settings.get("model_average"),
        **keywords, **method.kwargs,
    )


def load_program(path: str, config_args: str) -> dict:
    """What to train: a v1 config (layers declared with ``Layer``/helpers, ``settings`` and
    ``data_sources``) or a v2 script whose module globals name ``cost``, ``optimizer``,
    ``train_reader`` (and optionally ``test_reader``, ``batch_size``, ``num_passes``,
    ``feeding``). Returns those items, with ``topology`` ready to train."""
    from sculler.config.config_parser import run_config
    from sculler.topology import Topology

    parsed, names = run_config(path, config_args)
    if parsed is not None:
        settings = parsed.settings
        if "train_source" not in settings or "learning_method" not in settings:
            raise SystemExit(
                f"{path}: declare the data with data_sources(train=..., test=...) and the "
                "training with settings(batch_size=..., ...) (from sculler.config.helpers)"
            )
        train_reader = load_source(settings["train_source"])
        set_data_kinds(parsed.model_config, next(iter(train_reader())), settings["input_types"])
        return {
            "topology": Topology.from_model_config(parsed.model_config),
            "optimizer": make_optimizer(settings),
            "train_reader": train_reader,
            "test_reader": load_source(settings["test_source"])
            if settings.get("test_source") else None,
            "batch_size": settings["batch_size"],
            "num_passes": settings.get("num_passes"),
            "feeding": None,
        }
    missing = [k for k in ("cost", "optimizer", "train_reader") if k not in names]
    if missing:
        raise SystemExit(
            f"{path}: neither a v1 config (no layers declared) nor a v2 script (module globals "
            f"{missing} are missing; a v2 script defines cost, optimizer and train_reader)"
        )
    return {
        "topology": Topology(names["cost"]),
        "optimizer": names["optimizer"],
        "train_reader": names["train_reader"],
        "test_reader": names.get("test_reader"),
        "batch_size": names.get("batch_size", 128),
        "num_passes": names.get("num_passes"),
        "feeding": names.get("feeding"),
    }


def train_command(args: argparse.Namespace) -> int:
    import sculler as paddle

    program = load_program(args.config, args.config_args)
    paddle.init(seed=args.seed)
    topology, test_reader = program["topology"], program["test_reader"]
    parameters = paddle.parameters.create(topology)
    trainer = paddle.trainer.SGD(cost=topology, parameters=parameters,
                                 update_equation=program["optimizer"])
    batch_size = program["batch_size"]
    num_passes = args.num_passes or program["num_passes"] or 10
    os.makedirs(args.save_dir, exist_ok=True)
    costs: list[float] = []
    result = None

    def on_event(event: Any) -> None:
        nonlocal result
        if isinstance(event, paddle.event.EndIteration):
            costs.append(event.cost)
        elif isinstance(event, paddle.event.EndPass):
            line = f"Pass {event.pass_id}: train cost {np.mean(costs):.4f}"
            line += "".join(f", {k} {v:.4f}" for k, v in event.metrics.items())
            costs.clear()
            if test_reader is not None:
                result = trainer.test(reader=paddle.batch(test_reader, batch_size),
                                      feeding=program["feeding"])
                line += f" | test cost {result.cost:.4f}"
                line += "".join(f", {k} {v:.4f}" for k, v in result.metrics.items())
            print(line, flush=True)
            parameters.to_tar(os.path.join(args.save_dir, f"pass-{event.pass_id:05d}.tar"))

    start = time.perf_counter()
    trainer.train(
        reader=paddle.batch(paddle.reader.shuffle(program["train_reader"], buf_size=8192),
                            batch_size),
        num_passes=num_passes, event_handler=on_event, feeding=program["feeding"],
        show_progress=False if args.no_progress else None,
    )
    elapsed = time.perf_counter() - start
    final = os.path.join(args.save_dir, "params.tar")
    parameters.to_tar(final)
    print(f"Trained {num_passes} passes in {elapsed:.1f} s; parameters saved to {final}")
    if result is not None and "classification_error_evaluator" in result.metrics:
        accuracy = 1.0 - result.metrics["classification_error_evaluator"]
        print(f"Test accuracy: {accuracy:.2%}")
    return 0


def check_grad_command(args: argparse.Namespace) -> int:
    """Gradient-check a registered layer type on dense inputs of the given widths."""
    import runpy

    from sculler.testing import INPUT_DATA, GradientCheckError, check_layer_grad

    for spec in args.module or []:
        if spec.endswith(".py"):
            runpy.run_path(spec, run_name="__sculler_layer__")
        else:
            importlib.import_module(spec)
    config = {"size": args.size, "active_type": args.act,
              "inputs": [INPUT_DATA(int(w)) for w in args.inputs.split(",")]}
    try:
        report = check_layer_grad(config, args.type, args.batch_size, use_weight=args.use_weight)
    except GradientCheckError as err:
        print(f"FAILED: {err}")
        return 1
    for key, err in report.errors.items():
        print(f"{args.type}: {key}: relative error {err:.3g}")
    print(f"{args.type}: gradient check passed (worst {report.max_error:.3g})")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="sculler", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    train = sub.add_parser("train", help="train the model of a v1 config file")
    train.add_argument("--config", required=True, help="the config file (Python)")
    train.add_argument("--config_args", default="", help="name=value,... for get_config_arg")
    train.add_argument("--num_passes", type=int, default=None)
    train.add_argument("--save_dir", default="output", help="where parameter tars go")
    train.add_argument("--seed", type=int, default=1)
    train.add_argument("--no_progress", action="store_true", help="no progress bar")
    check = sub.add_parser("check-grad", help="gradient-check a layer type")
    check.add_argument("--type", required=True, help="the registered layer type")
    check.add_argument("--inputs", required=True, help="dense input widths, e.g. 5,3")
    check.add_argument("--size", type=int, default=4)
    check.add_argument("--act", default="linear")
    check.add_argument("--batch_size", type=int, default=10)
    check.add_argument("--use_weight", action="store_true")
    check.add_argument("--module", action="append",
                       help="a module or .py file that registers the layer (repeatable)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    command = train_command if args.command == "train" else check_grad_command
    return command(args)


if __name__ == "__main__":
    sys.exit(main())
