"""Start-up checks of the scheduling settings: a bad Kueue Configuration, feature gate or
start-time estimate setting is
reported when the service starts (`manage.py check`, runserver, the workers), naming the
file and the field, instead of failing every pass later."""

from __future__ import annotations

from django.core.checks import Error, register
from django.core.checks import Warning as CheckWarning

from scheduler.errors import FlagError, InputError


@register()
def scheduling_settings_check(app_configs, **kwargs) -> list[Error | CheckWarning]:
    from tasweb.scheduling.estimates import (
        eta_calibration_bands,
        eta_coverage,
        eta_range,
        eta_samples,
        eta_target_seconds,
    )
    from tasweb.scheduling.services import feature_gates, kueue_configuration

    errors = []
    config_read = True
    try:
        errors += [CheckWarning(f"TAS_KUEUE_CONFIG: {text}", id="scheduling.W001")
                   for text in kueue_configuration()[1].warnings()]
    except InputError as exc:
        config_read = False
        errors.append(Error(f"TAS_KUEUE_CONFIG: {exc}", id="scheduling.E002"))
    try:
        errors += [CheckWarning(text, id="scheduling.W002") for text in feature_gates().warnings()]
    except FlagError as exc:
        text = str(exc)
        errors.append(Error(text if text.startswith("TAS_FEATURE_GATES") else f"TAS_FEATURE_GATES: {text}",
                            id="scheduling.E001"))
    except InputError as exc:
        if config_read:  # what the Configuration says, refused under the gates it runs with
            errors.append(Error(f"TAS_KUEUE_CONFIG: {exc}", id="scheduling.E002"))
    for read, code in ((eta_range, "E003"), (eta_samples, "E004"), (eta_target_seconds, "E005"),
                       (eta_coverage, "E006"), (eta_calibration_bands, "E007")):
        try:
            read()
        except ValueError as exc:
            errors.append(Error(str(exc), id=f"scheduling.{code}"))
    return errors
