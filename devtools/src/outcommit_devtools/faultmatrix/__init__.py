"""The fault matrix: every committer x every store binding x every failure point.

``python -m outcommit_devtools.faultmatrix`` runs it and prints the table;
``tests/devtools/test_fault_matrix.py`` runs the CI-sized matrix, one item per cell.
"""

from . import report
from .runner import Cell, CellResult, Matrix, plan
from .scenarios import matrix_scenarios

__all__ = ["Cell", "CellResult", "Matrix", "matrix_scenarios", "plan", "report"]
