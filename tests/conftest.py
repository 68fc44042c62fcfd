import pytest


@pytest.fixture(autouse=True)
def _plain_http(settings):
    # The test client speaks plain HTTP; HTTPS-only settings are checked by test_settings.
    settings.SECURE_SSL_REDIRECT = False
    settings.SESSION_COOKIE_SECURE = False
    settings.CSRF_COOKIE_SECURE = False
