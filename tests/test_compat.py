"""What the previous release's users have keeps working, checked in fresh interpreters:

* every file saved by structlp 0.1.0 (``tests/fixtures/release_0_1_0``, saved before the
  package layout moved) loads in a new process and predicts exactly what it predicted then;
* every public name of every 0.1.0 module imports from its old path;
* a file saved now loads in a new process (the allow-list is a fixed table, not the classes
  the process happens to have imported) with identical predictions, for every learner;
* a class path that is neither current nor an alias is still refused.
"""

import json
import os
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import numpy as np
import pytest

import structlp

FIXTURES = Path(__file__).parent / "fixtures" / "release_0_1_0"
ROOT = Path(structlp.__file__).resolve().parent.parent

#: run in a fresh interpreter: load each file, predict on the saved examples, save the
#: predictions beside a JSON report
PREDICT = textwrap.dedent("""
    import json, sys
    import numpy as np
    import structlp
    out = {}
    for slp, npz, dest in json.loads(sys.argv[1]):
        model = structlp.load(slp)
        data = np.load(npz)
        X, i = [], 0
        while f"x{i}" in data or any(k.startswith(f"x{i}_") for k in data.files):
            if f"x{i}" in data:
                X.append(data[f"x{i}"])
            else:
                X.append({k[len(f"x{i}_"):]: data[k] for k in data.files
                          if k.startswith(f"x{i}_")})
            i += 1
        Y = model.predict(X)
        np.savez(dest, *[np.asarray(y) for y in Y])
        out[slp] = type(model).__module__ + "." + type(model).__qualname__
    print(json.dumps(out))
""")


def fresh_python(code, *args):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    if not str(Path(structlp.__file__)).count("site-packages"):
        env["PYTHONPATH"] = str(ROOT)   # the checkout under test, not an installed copy
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                          env=env, cwd=str(Path(__file__).parent), timeout=600)


def predict_in_fresh_process(pairs, tmp_path):
    jobs = [(str(slp), str(npz), str(tmp_path / f"{Path(slp).stem}.pred.npz"))
            for slp, npz in pairs]
    r = fresh_python(PREDICT, json.dumps(jobs))
    assert r.returncode == 0, r.stderr[-3000:]
    classes = json.loads(r.stdout.strip().splitlines()[-1])
    return classes, {slp: np.load(dest) for slp, _, dest in jobs}


def expected(npz):
    data = np.load(npz)
    return [data[k] for k in sorted((k for k in data.files if k.startswith("y")),
                                    key=lambda k: int(k[1:]))]


def test_release_0_1_0_files_load_in_a_fresh_process(tmp_path):
    pairs = [(p, p.with_suffix(".npz")) for p in sorted(FIXTURES.glob("*.slp"))]
    assert len(pairs) >= 14
    classes, preds = predict_in_fresh_process(pairs, tmp_path)
    for slp, npz in pairs:
        got = [preds[str(slp)][f"arr_{i}"] for i in range(len(preds[str(slp)].files))]
        want = expected(npz)
        assert len(got) == len(want), slp.name
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g, w, err_msg=slp.name)
    assert classes[str(FIXTURES / "frank_wolfe_tree_labeling.slp")] == \
        "structlp.learners.frank_wolfe.FrankWolfeLearner"


def test_release_0_1_0_import_paths_work_in_a_fresh_process():
    names = json.loads((FIXTURES / "public_names.json").read_text())
    code = textwrap.dedent("""
        import importlib, json, sys, warnings
        names = json.loads(sys.argv[1])
        missing, warned = [], set()
        for module, attrs in names.items():
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                mod = importlib.import_module(module)
            warned.update(str(w.message).split()[0] for w in caught
                          if issubclass(w.category, DeprecationWarning))
            missing += [f"{module}.{a}" for a in attrs if not hasattr(mod, a)]
        import structlp, structlp.frank_wolfe as old
        same = old.FrankWolfeLearner is structlp.FrankWolfeLearner
        print(json.dumps({"missing": missing, "warned": sorted(warned), "same": same}))
    """)
    r = fresh_python(code, json.dumps(names))
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["missing"] == []
    assert out["same"]
    # every moved module warns, naming itself (the message names the new path)
    assert {"structlp.frank_wolfe", "structlp.cutting_plane", "structlp.learner",
            "structlp.subgradient", "structlp.maxsum"} <= set(out["warned"])


def test_old_module_path_warns_with_the_new_path():
    r = fresh_python("import warnings; warnings.simplefilter('error')\n"
                     "import structlp\n"
                     "try:\n    import structlp.cutting_plane\n"
                     "except DeprecationWarning as w:\n    print(w)\n")
    assert "structlp.learners.cutting_plane" in r.stdout, r.stderr


def test_files_saved_now_load_in_a_fresh_process(tmp_path):
    sys.path.insert(0, str(FIXTURES))
    try:
        from make_fixtures import cases, flatten
    finally:
        sys.path.remove(str(FIXTURES))
    pairs, want = [], {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name, (est, X, Y, Xn) in cases().items():
            est.fit(X, Y)
            slp, npz = tmp_path / f"{name}.slp", tmp_path / f"{name}.npz"
            structlp.save(est, slp)
            np.savez(npz, **flatten(Xn, est.predict(Xn)))
            pairs.append((slp, npz))
    classes, preds = predict_in_fresh_process(pairs, tmp_path)
    assert len(classes) == len(pairs)
    for slp, npz in pairs:
        got = [preds[str(slp)][f"arr_{i}"] for i in range(len(preds[str(slp)].files))]
        for g, w in zip(got, expected(npz), strict=True):
            np.testing.assert_array_equal(g, w, err_msg=slp.name)


def test_unknown_class_path_is_still_refused(tmp_path):
    import hashlib
    import zipfile
    src = FIXTURES / "joint_qp_bipartite.slp"
    with zipfile.ZipFile(src) as z:
        members = {n: z.read(n) for n in z.namelist()}
    meta = json.loads(members["structlp.json"])
    meta["class"] = meta["root"]["class"] = "structlp.no_such_module.MaxMarginLearner"
    text = json.dumps(meta).encode()
    members["structlp.json"], members["SHA256"] = text, hashlib.sha256(text).hexdigest().encode()
    bad = tmp_path / "bad.slp"
    with zipfile.ZipFile(bad, "w") as z:
        for n, b in members.items():
            z.writestr(n, b)
    with pytest.raises(structlp.PersistenceError, match="not one of structlp's classes"):
        structlp.load(bad)


def test_class_table_lists_every_persistable_class():
    import importlib
    import pkgutil
    from structlp.persistence import LIBRARY_CLASSES, _is_persistable_class
    found = set()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        for info in pkgutil.walk_packages(structlp.__path__, "structlp."):
            mod = importlib.import_module(info.name)
            for obj in vars(mod).values():
                if isinstance(obj, type) and obj.__module__ == info.name \
                        and not obj.__name__.startswith("_") and _is_persistable_class(obj):
                    found.add(f"{obj.__module__}.{obj.__qualname__}")
    assert found == set(LIBRARY_CLASSES)
