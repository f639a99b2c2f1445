"""Graphs of labels: trees, junction trees and max-sum, shared by the built-in labelling
structures (:mod:`structlp.structures`) and the adversarial models (:mod:`structlp.agm`).

* :mod:`~structlp.graphical.trees`: tree examples, the local marginal polytope, the encoding
  of a labelling, max-sum and sum-product on forests;
* :mod:`~structlp.graphical.junction`: graph examples, junction trees, the clique-marginal
  polytope, max-sum and marginals on junction trees;
* :mod:`~structlp.graphical.maxsum`: the compiled max-sum kernel on trees;
* :mod:`~structlp.graphical.sumproduct`: the compiled sum-product kernel on one tree;
* :mod:`~structlp.graphical.kbest`: the k best labellings of trees and junction trees;
* :mod:`~structlp.graphical.jt_sampling`: exact samples on junction trees;
* :mod:`~structlp.graphical.dual_decomposition`: the local-polytope LP by dual
  decomposition into trees, one compiled loop;
* :mod:`~structlp.graphical.roof_duality`: the two-label local-polytope LP by one maximum
  flow;
* :mod:`~structlp.graphical.losses`: loss matrices over labels.
"""
