"""The sklearn wine MLP tuned with plain Optuna (the baseline of reports/optuna-lines.md)."""

import optuna
from sklearn.datasets import load_wine
from sklearn.metrics import log_loss
from sklearn.model_selection import train_test_split
from sklearn.neural_network import MLPClassifier
from sklearn.preprocessing import StandardScaler

X, y = load_wine(return_X_y=True)
X_train, X_val, y_train, y_val = train_test_split(X, y, test_size=0.3, random_state=0)
scaler = StandardScaler().fit(X_train)
X_train, X_val = scaler.transform(X_train), scaler.transform(X_val)


def objective(trial):
    lr = trial.suggest_float("lr", 1e-4, 1e-1, log=True)
    width = trial.suggest_int("width", 8, 64)
    act = trial.suggest_categorical("activation", ["relu", "tanh"])
    model = MLPClassifier((width,), activation=act, learning_rate_init=lr, max_iter=300)
    model.fit(X_train, y_train)
    return log_loss(y_val, model.predict_proba(X_val), labels=[0, 1, 2])


study = optuna.create_study(direction="minimize")
study.optimize(objective, n_trials=30)
print(study.best_params, study.best_value)
