"""WaDiRo-SCNN modelling library: scikit-learn estimators, solvers, search spaces.

Pure library: numpy, scipy, cvxpy, clarabel and scikit-learn only (no files, no pipeline).
"""

from ._baselines import GaussianProcessBaseline, LinearSVRBaseline
from ._constraints import PhysicalLimits, physical_limits
from ._out_of_sample import OutOfSampleBound
from ._program import (
    ScnnProgram,
    ScnnSolution,
    ScnnSolver,
    max_constraint_violation,
    objective_value,
    predictions,
)
from ._relu_network import ReluNetwork
from ._scnn import SCNN
from ._wadiro_linreg import WaDiRoLinearRegression
from ._wadiro_scnn import WaDiRoSCNN
from .certification import StabilityCertificate, certify_stability
from .exceptions import (
    InaccurateSolutionWarning,
    InfeasibleConstraintsError,
    InsufficientDataError,
    InvalidInputError,
    SolverError,
    SolverNotAvailableError,
    UnknownModelError,
    WadiroModelError,
)
from .registry import REGISTRY, SEARCH_SPACES, ModelEntry, make_model
from .search_spaces import Categorical, IntUniform, LogUniform
from .solvers import SOLVERS, IpmOptions, get_solver, solve_clarabel, solve_ipm

__all__ = [
    "REGISTRY",
    "SCNN",
    "SEARCH_SPACES",
    "SOLVERS",
    "Categorical",
    "GaussianProcessBaseline",
    "InaccurateSolutionWarning",
    "InfeasibleConstraintsError",
    "InsufficientDataError",
    "IntUniform",
    "IpmOptions",
    "InvalidInputError",
    "LinearSVRBaseline",
    "LogUniform",
    "ModelEntry",
    "OutOfSampleBound",
    "PhysicalLimits",
    "ReluNetwork",
    "ScnnProgram",
    "ScnnSolution",
    "ScnnSolver",
    "SolverError",
    "SolverNotAvailableError",
    "StabilityCertificate",
    "UnknownModelError",
    "WaDiRoLinearRegression",
    "WaDiRoSCNN",
    "WadiroModelError",
    "certify_stability",
    "get_solver",
    "make_model",
    "max_constraint_violation",
    "objective_value",
    "physical_limits",
    "predictions",
    "solve_clarabel",
    "solve_ipm",
]
