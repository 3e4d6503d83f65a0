"""The file mlflow runs to build the denpex_ml pyfunc ("models from code").

It is copied into every logged model and executed when the model loads; keep it this small.
See :mod:`denpex_ml.mlflow_model`.
"""

import mlflow

from denpex_ml.mlflow_model import DenpexPyfunc

mlflow.models.set_model(DenpexPyfunc())
